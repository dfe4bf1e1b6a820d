package frontend

import (
	"encoding/json"
	"slices"
	"testing"
)

// everyTool returns every tool any configuration serves.
func everyTool() []*tool {
	return append(allTools(), commandTools(&Config{Exec: ExecOptions{Programs: []string{"/bin/true"}, VCS: []string{"git"}}})...)
}

// notPaths are the properties of tool schemas that name no path. A
// property in no tool's declaration and not here fails
// TestPathDeclarations: a new argument must be declared one or the
// other.
var notPaths = []string{
	"after", "all", "append", "argv", "backend", "before", "charset", "content", "context", "cursor", "delete", "eol",
	"dry_run", "edits", "encoding", "exclude", "force", "glob", "grep", "hash", "hidden", "id", "ignore_case", "if_sha256", "if_tree_sha256",
	"insert", "label", "length", "line", "lines", "literal", "max_bytes", "max_count", "max_depth", "max_results",
	"multiline", "no_ignore", "offset", "output", "pattern", "patch", "recursive", "sort", "staged", "stdin",
	"stdin_encoding", "timeout_s", "totals", "type", "undo",
}

// TestPathDeclarations: every tool declares its path arguments, each
// declared argument is in its schema, and every other property of its
// schema is known to name no path, so that the audit, --rules and the
// approval, which all read the declaration, cannot miss one.
func TestPathDeclarations(t *testing.T) {
	for _, tl := range everyTool() {
		if !tl.pathsDeclared {
			t.Errorf("%s declares no path arguments (toolDecl.paths)", tl.name)
			continue
		}
		declared := map[string]bool{}
		for _, a := range tl.pathArgs {
			if _, ok := tl.schema.Properties[a.name]; !ok {
				t.Errorf("%s declares %q, which its schema does not have", tl.name, a.name)
			}
			declared[a.name] = true
			if _, ok := tl.schema.Properties[a.name+"_base64"]; ok {
				declared[a.name+"_base64"] = true
			}
		}
		for name := range tl.schema.Properties {
			_, twin := tl.schema.Properties[name+"_base64"]
			switch {
			case declared[name]:
			case twin:
				t.Errorf("%s: %q has a _base64 twin, so it names a path, and is not declared", tl.name, name)
			case !slices.Contains(notPaths, name):
				t.Errorf("%s: property %q is neither declared a path (toolDecl.paths) nor listed in notPaths", tl.name, name)
			}
		}
	}
}

// TestCallPaths: the declaration reads every form a path takes.
func TestCallPaths(t *testing.T) {
	byName := map[string]*tool{}
	for _, tl := range everyTool() {
		byName[tl.name] = tl
	}
	for _, c := range []struct {
		tool, args string
		want       []string
	}{
		{"fs_read", `{"path":"a"}`, []string{"path=a"}},
		{"fs_read", `{"path_base64":"/w=="}`, []string{"path=\xff"}},
		{"fs_move", `{"from":"a","to_base64":"Yg=="}`, []string{"from=a", "to=b"}},
		{"fs_copy", `{"from_base64":"YQ==","to":"b"}`, []string{"from=a", "to=b"}},
		{"fs_read_many", `{"paths":["a",{"path_base64":"Yg=="},7]}`, []string{"paths=a", "paths=b"}},
		{"fs_patch", `{"patch":"x","if_sha256":{"b":null,"a":null},"if_sha256_base64":{"Yw==":null}}`,
			[]string{"if_sha256=a", "if_sha256=b", "if_sha256=c"}},
		{"fs_exec", `{"argv":["x"],"cwd":"d"}`, []string{"cwd=d"}},
		{"fs_vcs_diff", `{"backend":"git","path":"r","files":["f"]}`, []string{"path=r", "files=f"}},
		{"fs_undo", `{"undo":"t"}`, nil},
		{"fs_rewind", `{"id":"x","path":"d","keep":["d/a","d/b"]}`, []string{"path=d", "keep=d/a", "keep=d/b"}},
		{"fs_read", `{"path_base64":"!!"}`, nil},
	} {
		var args map[string]any
		if err := json.Unmarshal([]byte(c.args), &args); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, np := range byName[c.tool].callPaths(args) {
			got = append(got, np.arg.name+"="+string(np.path))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("callPaths(%s %s) = %q, want %q", c.tool, c.args, got, c.want)
		}
	}
	// The rules judge every path relative to the root, not fs_vcs_*'s
	// files, which are relative to its path.
	var args map[string]any
	json.Unmarshal([]byte(`{"backend":"git","path":"r","files":["f"]}`), &args)
	if got := byName["fs_vcs_status"].judgedPaths(args); len(got) != 1 || string(got[0]) != "r" {
		t.Errorf("judgedPaths = %q, want [r]", got)
	}
}
