package frontend

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// writeToolHelp prints, for --tool-help, the tools the configuration would
// serve and each one's parameters, from the same definitions and schemas
// tools/list shows. It starts no worker and needs no client.
func writeToolHelp(w io.Writer, cfg *Config) {
	tools := append(allTools(), commandTools(cfg)...)
	asked, _ := askedTools(cfg.Ask, cfg.ToolsPrefix, tools)
	served := cfg.registered(tools)
	fmt.Fprintf(w, "fsmcp %s: %d tools for this command line\n", Version, len(served))
	for _, t := range served {
		var tags []string
		switch {
		case t.readOnly:
			tags = append(tags, "read-only")
		case t.destructive:
			tags = append(tags, "destructive")
		default:
			tags = append(tags, "writes")
		}
		if asked[t.name] {
			tags = append(tags, "asks the person first")
		}
		fmt.Fprintf(w, "\n%s%s [%s]\n", cfg.ToolsPrefix, t.name, strings.Join(tags, ", "))
		fmt.Fprintf(w, "  %s: %s\n", t.title, prefixToolNames(t.description, cfg.ToolsPrefix))
		names := make([]string, 0, len(t.schema.Properties))
		for n := range t.schema.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := t.schema.Properties[n]
			req := ""
			if slices.Contains(t.schema.Required, n) {
				req = ", required"
			}
			fmt.Fprintf(w, "  %s (%s%s): %s\n", n, schemaType(p), req, p.Description)
		}
	}
}

// schemaType is a property's JSON type in words: "string", "string or
// null", "array of object", "any" for a schema that allows every value.
func schemaType(p *jsonschema.Schema) string {
	types := p.Types
	if p.Type != "" {
		types = []string{p.Type}
	}
	for _, alt := range append(p.AnyOf, p.OneOf...) {
		types = append(types, schemaType(alt))
	}
	t := strings.Join(types, " or ")
	if t == "" {
		t = "any"
	}
	if p.Items != nil {
		t += " of " + schemaType(p.Items)
	}
	return t
}
