package frontend

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/fsmcp/fsmcp/proto/charset"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The contents of the tools' input schemas beyond what the Go types say,
// and the sentences that explain a refused argument. The schemas are what
// a model reads to build a call, so every bound the front-end enforces is
// stated in them; an argument they refuse is explained by name, with what
// is allowed, never with the validator's internals.

// argumentRules are the bounds of arguments that mean the same in every
// tool that takes them.
var argumentRules = map[string]func(*jsonschema.Schema){
	"encoding": func(s *jsonschema.Schema) { s.Enum = []any{"utf8", "base64"} },
	"charset": func(s *jsonschema.Schema) {
		for _, n := range charset.Names() {
			s.Enum = append(s.Enum, n)
		}
	},
	"eol":     func(s *jsonschema.Schema) { s.Enum = []any{"file"} },
	"offset":  minimum(0),
	"delete":  minimum(0),
	"length":  minimum(0),
	"context": between(0, maxContext),
	"before":  between(0, maxContext),
	"after":   between(0, maxContext),
	"lines":   minimum(1),
	"output":  func(s *jsonschema.Schema) { s.Enum = []any{"matches", "files", "count"} },
	"paths": func(s *jsonschema.Schema) {
		lo, hi := 1, maxReadManyPaths
		s.Type, s.Types, s.MinItems, s.MaxItems = "array", nil, &lo, &hi
	},
	"max_count":   minimum(1),
	"max_results": minimum(1),
	"edits":       nonEmptyArray,
}

// nonEmptyArray is a required list that must hold something: null, which
// a Go slice would allow, is refused.
func nonEmptyArray(s *jsonschema.Schema) {
	one := 1
	s.Type, s.Types, s.MinItems = "array", nil, &one
}

func minimum(n float64) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Minimum = &n }
}

func between(lo, hi float64) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Minimum, s.Maximum = &lo, &hi }
}

// refineSchema adds argumentRules to a tool's top-level properties, and
// refuses null for the optional fields of objects inside lists, as
// newTool does for the top level.
func refineSchema(s *jsonschema.Schema) {
	for name, prop := range s.Properties {
		if rule, ok := argumentRules[name]; ok {
			rule(prop)
		}
		if item := prop.Items; item != nil {
			for k, p := range item.Properties {
				if !slices.Contains(item.Required, k) && len(p.Types) == 2 && p.Types[0] == "null" {
					p.Type, p.Types = p.Types[1], nil
				}
			}
		}
	}
}

// explainInvalid phrases why v does not satisfy s, which the validator
// reported as err: a sentence naming the argument and what it allows.
func explainInvalid(s *jsonschema.Schema, v any, err error) string {
	if msg := explain("", s, v); msg != "" {
		return msg
	}
	// Every keyword the tools' schemas use is explained above; this is
	// what a keyword added without an explanation would show.
	return "the arguments do not match the tool's input schema: " +
		strings.TrimPrefix(err.Error(), "validating root: ")
}

// explain returns why v, the argument at name ("" for the arguments
// object), does not satisfy s, or "" if it does as far as explain checks.
func explain(name string, s *jsonschema.Schema, v any) string {
	what := name
	if what == "" {
		what = "the arguments"
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
		msg := fmt.Sprintf("%s must be %s, not %s", what, describeSchema(s, types), jsonKind(v))
		if v == nil && name != "" && !strings.Contains(name, "[") {
			msg += "; leave it out for the default"
		}
		return msg
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		return fmt.Sprintf("%s must be %s, not %s", what, enumList(s.Enum), quoteValue(v))
	}
	switch v := v.(type) {
	case float64:
		if (s.Minimum != nil && v < *s.Minimum) || (s.Maximum != nil && v > *s.Maximum) {
			return fmt.Sprintf("%s must be %s, not %v", what, describeSchema(s, types), v)
		}
	case string:
		n := len([]rune(v))
		if s.MinLength != nil && n < *s.MinLength {
			return fmt.Sprintf("%s must be at least %d characters long", what, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Sprintf("%s must be at most %d characters long", what, *s.MaxLength)
		}
	case []any:
		if s.MinItems != nil && len(v) < *s.MinItems {
			return fmt.Sprintf("%s must hold at least %d %s", what, *s.MinItems, plural(*s.MinItems, "entry", "entries"))
		}
		if s.MaxItems != nil && len(v) > *s.MaxItems {
			return fmt.Sprintf("%s must hold at most %d %s", what, *s.MaxItems, plural(*s.MaxItems, "entry", "entries"))
		}
		if s.Items != nil {
			for i, item := range v {
				if msg := explain(fmt.Sprintf("%s[%d]", name, i), s.Items, item); msg != "" {
					return msg
				}
			}
		}
	case map[string]any:
		return explainObject(name, what, s, v)
	}
	return ""
}

// explainObject checks an object's property names, required properties
// and each property's value, in that order.
func explainObject(name, what string, s *jsonschema.Schema, v map[string]any) string {
	known := slices.Sorted(func(yield func(string) bool) {
		for k := range s.Properties {
			if !yield(k) {
				return
			}
		}
	})
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if s.AdditionalProperties != nil && s.AdditionalProperties.Not != nil {
		for _, k := range keys {
			if _, ok := s.Properties[k]; !ok {
				return fmt.Sprintf("%s has no argument %q; it takes %s", whose(what), k, strings.Join(known, ", "))
			}
		}
	}
	for _, r := range s.Required {
		if _, ok := v[r]; !ok {
			msg := fmt.Sprintf("%s is required", join(name, r))
			if d := s.Properties[r].Description; d != "" {
				msg += ": " + strings.TrimPrefix(d, "required: ")
			}
			return msg
		}
	}
	for _, k := range keys {
		if msg := explain(join(name, k), s.Properties[k], v[k]); msg != "" {
			return msg
		}
	}
	return ""
}

func whose(what string) string {
	if what == "the arguments" {
		return "this tool"
	}
	return what
}

func join(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// hasType reports whether v, decoded by encoding/json, is of JSON Schema
// type t.
func hasType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case float64:
		return t == "number" || t == "integer" && v == math.Trunc(v) && !math.IsInf(v, 0)
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// jsonKind names v's JSON type for a message.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(v)
	case float64:
		return fmt.Sprint(v)
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// describeSchema says in words what s with the given types allows.
func describeSchema(s *jsonschema.Schema, types []string) string {
	var alts []string
	for _, t := range types {
		switch t {
		case "integer", "number":
			n := "an integer"
			if t == "number" {
				n = "a number"
			}
			switch {
			case s.Minimum != nil && s.Maximum != nil:
				n += fmt.Sprintf(" from %v to %v", *s.Minimum, *s.Maximum)
			case s.Minimum != nil:
				n += fmt.Sprintf(" of at least %v", *s.Minimum)
			case s.Maximum != nil:
				n += fmt.Sprintf(" of at most %v", *s.Maximum)
			}
			alts = append(alts, n)
		case "string":
			if len(s.Enum) > 0 {
				alts = append(alts, enumList(s.Enum))
			} else {
				alts = append(alts, "a string")
			}
		case "boolean":
			alts = append(alts, "true or false")
		case "array":
			alts = append(alts, "an array")
		case "object":
			alts = append(alts, "an object")
		case "null":
			alts = append(alts, "null")
		}
	}
	return strings.Join(alts, " or ")
}

func enumList(enum []any) string {
	q := make([]string, len(enum))
	for i, e := range enum {
		q[i] = quoteValue(e)
	}
	switch len(q) {
	case 1:
		return q[0]
	case 2:
		return q[0] + " or " + q[1]
	}
	return "one of " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func quoteValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return jsonKind(v)
}

// toolNameRef finds a tool's name inside a description.
var toolNameRef = regexp.MustCompile(`\bfs_[a-z0-9_]+\b`)

// prefixToolNames applies --tools-prefix to the tool names a description
// mentions, so that the model calls the names it was given.
func prefixToolNames(description, prefix string) string {
	if prefix == "" {
		return description
	}
	return toolNameRef.ReplaceAllString(description, prefix+"$0")
}

// undeclaredMethods answers the methods of capabilities the server does
// not declare with "method not found", as for any unknown method: go-sdk
// would otherwise answer resources/list, prompts/list and
// logging/setLevel with empty lists and success.
func undeclaredMethods(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if area, _, _ := strings.Cut(method, "/"); area == "resources" || area == "prompts" ||
			area == "logging" || area == "completion" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: fmt.Sprintf("method %q not found: fsmcp declares the tools capability only", method)}
		}
		return next(ctx, method, req)
	}
}
