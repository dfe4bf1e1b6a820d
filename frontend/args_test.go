package frontend

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// typedSeeds are arguments at the edges of what typedArgs may accept.
var typedSeeds = []string{`{}`, `{"path":"a"}`, `{"path":"a","hash":true}`, `{"path":"a","hash":"true"}`,
	`{"path":"a","offset":5,"length":10}`, `{"path":"a","offset":-1}`, `{"path":"a","offset":1.0}`,
	`{"path":"a","offset":1e2}`, `{"path":"a","offset":-0}`, `{"path":"a","offset":9223372036854775808}`,
	`{"path":"a","encoding":"base64"}`, `{"path":"a","encoding":"hex"}`, `{"path":"a","encoding":null}`,
	`{"path":"a","Path":"b"}`, `{"PATH":"a"}`, `{"path":"a","path":"b"}`, `{"path_base64":"YQ=="}`,
	`{"path":"a","path_base64":"YQ=="}`, `{"from":"a","to":"b"}`, `{"from":"a","to_base64":"Yg=="}`,
	`{"path":"a","context":1001}`, `{"path":"a","lines":0}`, `{"path":"a","lines":1}`, ` {"path":"a"} `,
	`{"path":"a"}x`, `{"path":"a"}{}`, `{"path":"a\u00e9\n\"\\"}`, `{"path":["a"]}`, `{"path":{"a":1}}`,
	`[]`, `null`, `"x"`, `1`, `{"path":"a","bogus":1}`, `{"path":"a","exclude":[]}`, `{"path":"a","exclude":["x",1]}`,
	`{"argv":["true"]}`, `{"argv":[]}`, `{"argv":null}`, `{"argv":["a"],"timeout_s":0}`, `{"path":"a","recursive":false}`,
	`{"path":"\ud83d\ude00"}`, `{"path":"a","max_depth":-5}`, `{"path":"a","dry_run":true,"if_tree":"x"}`}

// FuzzTypedArguments checks the one-pass decoding against the full check:
// whatever typedArgs accepts, validateArguments accepts too, and both
// decode it to the same input and the same paths for the audit line.
func FuzzTypedArguments(f *testing.F) {
	for _, s := range typedSeeds {
		f.Add([]byte(s))
	}
	tools := append(allTools(), commandTools(&Config{Exec: ExecOptions{Programs: []string{"/bin/true"}}})...)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, tool := range tools {
			if tool.typed == nil {
				continue
			}
			args, err := rawArguments(&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool.name, Arguments: raw}})
			if err != nil {
				continue
			}
			in := tool.newInput()
			if !tool.typed.decode(args, in) {
				continue
			}
			full, m, err := tool.decodeFull(args)
			if err != nil {
				t.Fatalf("%s: typed decoding accepted %q, the full check refuses it: %v", tool.name, raw, err)
			}
			if !reflect.DeepEqual(in, full) {
				t.Fatalf("%s(%q): typed decoding gives %+v, the full one %+v", tool.name, raw, in, full)
			}
			got, want := tool.callPaths(tool.typed.auditArgs(in)), tool.callPaths(m)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s(%q): audit paths %v, the full decoding's %v", tool.name, raw, got, want)
			}
		}
	})
}

// TestTypedArgumentsCover: the tools whose speed matters most decode in
// one pass, and the ordinary call takes that path.
func TestTypedArgumentsCover(t *testing.T) {
	byName := map[string]*tool{}
	for _, tl := range allTools() {
		byName[tl.name] = tl
	}
	for name, args := range map[string]string{
		"fs_stat": `{"path":"f4k"}`, "fs_read": `{"path":"f4k","offset":0,"length":4096}`,
		"fs_list": `{"path":"dir"}`, "fs_move": `{"from":"a","to":"b"}`,
	} {
		tl := byName[name]
		if tl == nil || tl.typed == nil {
			t.Fatalf("%s decodes its arguments twice", name)
		}
		in := tl.newInput()
		if !tl.typed.decode([]byte(args), in) {
			t.Errorf("%s(%s) went to the full check", name, args)
		}
	}
}

// TestTypedArgumentsRefusals: arguments the one-pass decoding declines
// are refused with the full check's message, through tool.decode.
func TestTypedArgumentsRefusals(t *testing.T) {
	var read *tool
	for _, tl := range allTools() {
		if tl.name == "fs_read" {
			read = tl
		}
	}
	for args, want := range map[string]string{
		`{"path":"a","lines":0}`:    "lines must be an integer of at least 1, not 0",
		`{"path":"a","offset":-1}`:  "offset must be an integer of at least 0, not -1",
		`{"path":"a","Path":"b"}`:   `this tool has no argument "Path"`,
		`{"path":null}`:             "path must be a string, not null; leave it out for the default",
		`{"path":"a","length":"5"}`: "length must be an integer of at least 0, not a string",
	} {
		_, err := read.decode(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "fs_read", Arguments: []byte(args)}})
		te, ok := err.(*toolError)
		if !ok || !strings.Contains(te.message, want) {
			t.Errorf("fs_read(%s): %v, want a refusal saying %q", args, err, want)
		}
	}
}
