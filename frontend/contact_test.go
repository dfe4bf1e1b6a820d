package frontend

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// contactSession connects an in-memory client to a front-end built with
// cfg and no worker: enough for tools/list and for arguments refused
// before anything reaches the worker.
func contactSession(t *testing.T, cfg *Config) *mcp.ClientSession {
	t.Helper()
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = defaultMaxResponseBytes
	}
	srv := (&server{cfg: cfg}).build()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "contact-test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func contactTools(t *testing.T, cfg *Config) []*mcp.Tool {
	t.Helper()
	res, err := contactSession(t, cfg).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// mentionedTool finds tool names, with any prefix, in a description.
var mentionedTool = regexp.MustCompile(`\b[A-Za-z0-9_.-]*fs_[a-z0-9_]+\b`)

// descriptionProblems says what a registered tool's metadata lacks for a
// model to use it: a title, a purpose in one sentence, then the workflow
// (how to continue a page, where a precondition's sha256 comes from,
// which other tool to use when), with every tool name as registered.
func descriptionProblems(tl *mcp.Tool, registered map[string]bool, prefix string) []string {
	var p []string
	if tl.Title == "" || len(tl.Title) > 32 {
		p = append(p, "a title of 1 to 32 characters (toolDecl.title)")
	}
	d := tl.Description
	first, rest, _ := strings.Cut(d, ". ")
	if rest == "" || len(first) > 120 {
		p = append(p, "a first sentence of purpose (at most 120 characters), then the workflow")
	}
	if strings.Contains(d, "--") {
		p = append(p, "no command-line flags (of fsmcp or rg) a model cannot pass")
	}
	props := map[string]bool{}
	if s, ok := tl.InputSchema.(map[string]any); ok {
		if ps, ok := s["properties"].(map[string]any); ok {
			for k := range ps {
				props[k] = true
			}
		}
	}
	if props["cursor"] && !strings.Contains(d, "cursor") {
		p = append(p, "how to continue a truncated reply with its cursor")
	}
	if props["if_sha256"] && !strings.Contains(d, prefix+"fs_stat") && !strings.Contains(d, prefix+"fs_read") && !strings.Contains(d, "reply's sha256") {
		p = append(p, "where if_sha256 comes from ("+prefix+"fs_stat or "+prefix+"fs_read)")
	}
	others := 0
	for _, m := range mentionedTool.FindAllString(d, -1) {
		switch {
		case !strings.HasPrefix(m, prefix+"fs_"):
			p = append(p, "the tools prefix on "+m)
		case m != tl.Name && registered[m]:
			others++
		}
	}
	if others == 0 {
		p = append(p, "which other registered tool to use when")
	}
	return p
}

// Every registered tool has a title and a description a model can follow,
// with the tools prefix applied inside it: a tool added without them
// fails here.
func TestContactToolDescriptions(t *testing.T) {
	for _, prefix := range []string{"", "files."} {
		tools := contactTools(t, &Config{ToolsPrefix: prefix})
		registered := map[string]bool{}
		for _, tl := range tools {
			registered[tl.Name] = true
		}
		for _, tl := range tools {
			if !strings.HasPrefix(tl.Name, prefix) {
				t.Errorf("tool %q lacks the prefix %q", tl.Name, prefix)
			}
			for _, problem := range descriptionProblems(tl, registered, prefix) {
				t.Errorf("prefix %q: tool %s needs %s; description: %q", prefix, tl.Name, problem, tl.Description)
			}
		}
	}
}

// The check above catches what it claims to: each kind of defect in a
// description is reported.
func TestContactDescriptionCheck(t *testing.T) {
	reg := map[string]bool{"fs_list": true, "fs_glob": true, "fs_write": true}
	schema := map[string]any{"properties": map[string]any{"cursor": map[string]any{}, "if_sha256": map[string]any{}}}
	for _, c := range []struct {
		tool *mcp.Tool
		want string
	}{
		{&mcp.Tool{Name: "fs_list", Description: "List. Use fs_glob."}, "a title"},
		{&mcp.Tool{Name: "fs_list", Title: "L", Description: "List entries and use fs_glob"}, "first sentence"},
		{&mcp.Tool{Name: "fs_list", Title: "L", Description: "List. Pass --hidden to fs_glob."}, "flags"},
		{&mcp.Tool{Name: "fs_list", Title: "L", Description: "List. Then fs_glob.", InputSchema: schema}, "cursor"},
		{&mcp.Tool{Name: "fs_list", Title: "L", Description: "List. Then fs_glob with the cursor.", InputSchema: schema}, "if_sha256"},
		{&mcp.Tool{Name: "fs_list", Title: "L", Description: "List. Nothing else."}, "which other"},
		{&mcp.Tool{Name: "x_fs_list", Title: "L", Description: "List. Use fs_glob."}, "prefix"},
	} {
		prefix := ""
		if strings.HasPrefix(c.tool.Name, "x_") {
			prefix = "x_"
		}
		got := strings.Join(descriptionProblems(c.tool, reg, prefix), "; ")
		if !strings.Contains(got, c.want) {
			t.Errorf("descriptionProblems(%q) = %q, want it to mention %q", c.tool.Description, got, c.want)
		}
	}
}

// originalTools are the ten tools of the first contract, whose tools/list
// was 8,962 bytes before titles and workflow were added.
var originalTools = []string{"fs_stat", "fs_list", "fs_read", "fs_glob", "fs_grep",
	"fs_write", "fs_replace", "fs_mkdir", "fs_move", "fs_delete"}

// laterArguments are the arguments that Version 2 of the contract added to
// the original tools: the measure below leaves them out, so that it
// weighs what titles and workflow cost, not new features.
var laterArguments = map[string][]string{
	"fs_stat":    {"hash"},
	"fs_list":    {"sort", "totals"},
	"fs_read":    {"line", "lines", "if_sha256", "charset"},
	"fs_glob":    {"max_depth", "sort", "exclude"},
	"fs_grep":    {"before", "after", "output", "type", "multiline", "max_results"},
	"fs_write":   {"append", "dry_run", "charset"},
	"fs_replace": {"dry_run", "charset", "eol"},
	"fs_move":    {"if_sha256", "if_tree_sha256"},
	"fs_delete":  {"if_sha256", "if_tree_sha256"},
}

// tools/list stays small: the ten original tools, with their original
// arguments, take fewer bytes than they did before they carried titles
// and workflow.
func TestContactToolsListBytes(t *testing.T) {
	var keep []*mcp.Tool
	for _, tl := range contactTools(t, &Config{}) {
		for _, n := range originalTools {
			if tl.Name == n {
				keep = append(keep, tl)
			}
		}
	}
	if len(keep) != len(originalTools) {
		t.Fatalf("found %d of the %d original tools", len(keep), len(originalTools))
	}
	for i, tl := range keep {
		later := laterArguments[tl.Name]
		if len(later) == 0 {
			continue
		}
		b, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema map[string]any
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		props := schema["properties"].(map[string]any)
		for _, a := range later {
			if _, ok := props[a]; !ok {
				t.Fatalf("%s has no argument %s", tl.Name, a)
			}
			delete(props, a)
		}
		c := *tl
		c.InputSchema = schema
		keep[i] = &c
	}
	b, err := json.Marshal(&mcp.ListToolsResult{Tools: keep})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list of the ten original tools, original arguments: %d bytes", len(b))
	if len(b) >= 8962 {
		t.Errorf("tools/list of the ten original tools is %d bytes, want under 8962", len(b))
	}
}

// Each refused argument is explained in a sentence that names it and says
// what is allowed, never in the validator's terms.
func TestContactValidationMessages(t *testing.T) {
	cs := contactSession(t, &Config{})
	for _, c := range []struct {
		tool, args, want string
	}{
		{"fs_read", `{"path":"a","offset":null}`, `offset must be an integer of at least 0, not null; leave it out for the default`},
		{"fs_read", `{}`, `path is required: a path relative to the root, such as "src/main.go", or "." for the root itself; path_base64 for a name that is not UTF-8`},
		{"fs_write", `{"content":"x","if_sha256":null}`, `path is required: a path relative to the root`},
		{"fs_move", `{"from":"a"}`, `to is required: a path relative to the root`},
		{"fs_read", `{"path":"a","offset":-1}`, `offset must be an integer of at least 0, not -1`},
		{"fs_read", `{"path":"a","length":1.5}`, `length must be an integer of at least 0, not 1.5`},
		{"fs_write", `{"path":"a","content":"x","if_sha256":null,"encoding":"latin1"}`, `encoding must be "utf8" or "base64", not "latin1"`},
		{"fs_write", `{"path":"a","content":"x"}`, `if_sha256 is required: the file's sha256 now, or null to create it`},
		{"fs_write", `{"path":"a","content":"x","if_sha256":"abc"}`, `if_sha256 must be 64 lowercase hex digits (a sha256 from fs_stat) or null`},
		{"fs_stat", `{"path":"a","follow":true}`, `this tool has no argument "follow"; it takes hash, path, path_base64`},
		{"fs_stat", `{"path":3}`, `path must be a string, not 3`},
		{"fs_stat", `{"path":"a","path_base64":"YQ=="}`, `give path or path_base64, not both`},
		{"fs_stat", `{"path_base64":"!!"}`, `path_base64 must be standard base64`},
		{"fs_grep", `{"path":"","pattern":"x","context":5000}`, `context must be an integer from 0 to 1000, not 5000`},
		{"fs_grep", `{"path":"","pattern":"x","max_count":0}`, `max_count must be an integer of at least 1, not 0`},
		{"fs_grep", `{"path":"","pattern":"x","glob":["a",3]}`, `glob[1] must be a string, not 3`},
		{"fs_grep", `{"path":"","pattern":"x","literal":"yes"}`, `literal must be true or false, not a string`},
		{"fs_grep", `{"path":""}`, `pattern is required`},
		{"fs_replace", `{"path":"a","edits":[],"if_sha256":null}`, `edits must hold at least 1 entry`},
		{"fs_replace", `{"path":"a","edits":null,"if_sha256":null}`, `edits must be an array, not null`},
		{"fs_replace", `{"path":"a","edits":[{"old":"a"}],"if_sha256":null}`, `edits[0].new is required: text to put in its place`},
		{"fs_replace", `{"path":"a","edits":[{"old":"a","new":"b","all":null}],"if_sha256":null}`, `edits[0].all must be true or false, not null`},
		{"fs_replace", `{"path":"a","edits":[{"old":"a","new":"b","x":1}],"if_sha256":null}`, `edits[0] has no argument "x"; it takes all, new, old`},
		{"fs_replace", `{"path":"a","edits":[{"old":"","new":"b"}],"if_sha256":null}`, `edits[0].old must not be empty`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatalf("%s %s: %v", c.tool, c.args, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		var doc struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatalf("%s %s: %v in %s", c.tool, c.args, err, text)
		}
		if !res.IsError || doc.Error.Code != "invalid_argument" || !strings.HasPrefix(doc.Error.Message, c.want) {
			t.Errorf("%s %s = %s\nwant invalid_argument starting %q", c.tool, c.args, text, c.want)
		}
		for _, bad := range []string{"reflect", "validating", "/properties"} {
			if strings.Contains(doc.Error.Message, bad) {
				t.Errorf("%s %s: message %q speaks of the validator (%q)", c.tool, c.args, doc.Error.Message, bad)
			}
		}
	}
}

// The server declares only the tools capability, and answers the methods
// of the others as unknown rather than with empty successes.
func TestContactCapabilities(t *testing.T) {
	cs := contactSession(t, &Config{})
	caps := cs.InitializeResult().Capabilities
	if caps.Tools == nil || caps.Logging != nil || caps.Resources != nil || caps.Prompts != nil || caps.Completions != nil {
		t.Errorf("capabilities %+v, want tools only", caps)
	}
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"resources/list":   func() error { _, err := cs.ListResources(ctx, nil); return err },
		"prompts/list":     func() error { _, err := cs.ListPrompts(ctx, nil); return err },
		"logging/setLevel": func() error { return cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}) },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%s: %v, want method not found", name, err)
		}
	}
}

// The front-end's soft memory limit holds a few copies of a page for
// every call that may be in flight and, over HTTP, every session kept.
func TestContactMemoryLimit(t *testing.T) {
	stdio := &Config{MaxCalls: 64, MaxResponseBytes: 64 << 10, Transport: "stdio", HTTPMaxSessions: 1024}
	http := *stdio
	http.Transport = "http"
	for _, c := range []struct {
		cfg  *Config
		want int64
	}{
		{stdio, 48 << 20},
		{&http, 64 << 20},
	} {
		if got := frontendMemoryLimit(c.cfg); got != c.want {
			t.Errorf("frontendMemoryLimit(%s, %d calls, %d-byte pages) = %d, want %d", c.cfg.Transport, c.cfg.MaxCalls, c.cfg.MaxResponseBytes, got, c.want)
		}
	}
}
