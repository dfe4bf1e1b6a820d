package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// structuredCheck validates results of a --structured-content server
// against the outputSchema each tool declares.
type structuredCheck struct {
	t       *testing.T
	max     int
	schemas map[string]*jsonschema.Resolved
	// ok and codes record what was validated: tools with a success, and
	// error codes by tool.
	ok    map[string]bool
	codes map[string]bool
}

func newStructuredCheck(t *testing.T, s *server, max int) *structuredCheck {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &structuredCheck{t: t, max: max, schemas: map[string]*jsonschema.Resolved{}, ok: map[string]bool{}, codes: map[string]bool{}}
	for tool, err := range s.session.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema jsonschema.Schema
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatalf("%s: outputSchema %s: %v", tool.Name, b, err)
		}
		if schema.Type != "object" {
			t.Errorf("%s: outputSchema has type %q, want object (MCP 2025-11-25)", tool.Name, schema.Type)
		}
		if c.schemas[tool.Name], err = schema.Resolve(nil); err != nil {
			t.Fatalf("%s: outputSchema does not resolve: %v", tool.Name, err)
		}
	}
	return c
}

// check fails unless res carries structuredContent equal to its text
// document, valid against the tool's outputSchema, the two within the
// bound together; it returns the document.
func (c *structuredCheck) check(name string, res *mcp.CallToolResult) map[string]any {
	c.t.Helper()
	// fs_view's picture follows the document; the document is the first
	// block, as for every tool.
	first := *res
	first.Content = res.Content[:min(len(res.Content), 1)]
	r := checkReply(c.t, name, &first)
	if res.StructuredContent == nil {
		c.t.Fatalf("%s: no structuredContent: %.300s", name, r.text)
	}
	sc, err := json.Marshal(res.StructuredContent)
	if err != nil {
		c.t.Fatal(err)
	}
	var structured any
	if err := json.Unmarshal(sc, &structured); err != nil {
		c.t.Fatal(err)
	}
	if !reflect.DeepEqual(structured, any(r.doc)) {
		c.t.Errorf("%s: structuredContent differs from the text document:\n%.500s\n%.500s", name, sc, r.text)
	}
	schema, ok := c.schemas[name]
	if !ok {
		c.t.Fatalf("%s: not in tools/list", name)
	}
	if err := schema.Validate(structured); err != nil {
		c.t.Errorf("%s: reply does not match its outputSchema: %v\n%.1000s", name, err, r.text)
	}
	if n := len(r.text) + len(sc); n > c.max {
		c.t.Errorf("%s: text and structuredContent take %d bytes together, over --max-response-bytes %d", name, n, c.max)
	}
	if r.isError {
		c.codes[name+" "+r.code()] = true
	} else {
		c.ok[name] = true
	}
	return r.doc
}

func (c *structuredCheck) call(s *server, name string, args any) map[string]any {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s(%.200v): %v\nstderr:\n%.2000s", name, args, err, s.stderr.String())
	}
	return c.check(name, res)
}

// With --structured-content every tool declares an outputSchema whose top
// is an object, and every reply, of every tool, successes and refusals
// (the tools' own, the schema validator's, the stdio layer's for
// oversized arguments), carries structuredContent equal to its text
// document that validates against that schema (jsonschema-go, the
// validator go-sdk uses), the two together within --max-response-bytes.
// Without the flag, nothing of it is sent.
func TestContactStructuredContent(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	repo := filepath.Join(root, "repo")
	qdir := filepath.Join(base, "quarantine")
	for _, d := range []string{repo, qdir, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+base, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	writeFile(t, filepath.Join(repo, "r.txt"), []byte("one\n"), 0o644)
	git("add", ".")
	git("commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(repo, "r.txt"), []byte("two\n"), 0o644)
	a := "alpha\nbeta\ngamma\n"
	writeFile(t, filepath.Join(root, "a.txt"), []byte(a), 0o644)
	writeFile(t, filepath.Join(root, "sub", "b.txt"), []byte("beta again\n"), 0o644)
	writeFile(t, filepath.Join(root, "caf\xe9.txt"), []byte("beta \xff\n"), 0o644)
	writeFile(t, filepath.Join(root, "pic.png"), mediaFiles(t)["image/png"], 0o644)
	writeFile(t, filepath.Join(root, "big.txt"), []byte(strings.Repeat("0123456789abcde\n", 4096)), 0o644)

	const max = 16384
	s := start(t, root, "--structured-content", "--max-response-bytes", fmt.Sprint(max), "--quarantine", qdir,
		"--exec", "/usr/bin/cat", "--vcs", "git")
	c := newStructuredCheck(t, s, max)

	latin := base64.StdEncoding.EncodeToString([]byte("caf\xe9.txt"))
	c.call(s, "fs_stat", map[string]any{"path": ""})
	c.call(s, "fs_stat", map[string]any{"path_base64": latin})
	c.call(s, "fs_list", map[string]any{"path": ""})
	c.call(s, "fs_list", map[string]any{"path": "", "sort": "size", "totals": true})
	big := c.call(s, "fs_read", map[string]any{"path": "big.txt"})
	c.call(s, "fs_read", map[string]any{"path": "a.txt", "line": 2, "lines": 1})
	c.call(s, "fs_read_many", map[string]any{"paths": []any{"a.txt", "missing.txt", map[string]any{"path_base64": latin}}})
	c.call(s, "fs_glob", map[string]any{"path": "", "pattern": "*.txt"})
	c.call(s, "fs_grep", map[string]any{"path": "", "pattern": "beta", "context": 1})
	c.call(s, "fs_grep", map[string]any{"path": "", "pattern": "beta", "output": "files", "max_results": 1})
	c.call(s, "fs_grep", map[string]any{"path": "", "pattern": "beta", "output": "count"})
	c.call(s, "fs_tree", map[string]any{"path": ""})
	c.call(s, "fs_view", map[string]any{"path": "pic.png"})
	w := c.call(s, "fs_write", map[string]any{"path": "a.txt", "content": "alpha\n", "if_sha256": sha([]byte(a))})
	c.call(s, "fs_write", map[string]any{"path": "n.txt", "content": "new\n", "if_sha256": nil, "dry_run": true})
	rep := c.call(s, "fs_replace", map[string]any{"path": "a.txt", "if_sha256": w["sha256"],
		"edits": []map[string]any{{"old": "alpha", "new": "ALPHA"}}})
	c.call(s, "fs_splice", map[string]any{"path": "a.txt", "offset": 0, "delete": 1, "insert": "a", "if_sha256": rep["sha256"]})
	c.call(s, "fs_mkdir", map[string]any{"path": "d/e"})
	c.call(s, "fs_move", map[string]any{"from": "d/e", "to": "d/f"})
	c.call(s, "fs_copy", map[string]any{"from": "sub", "to": "sub2", "recursive": true})
	c.call(s, "fs_digest", map[string]any{"path": "sub"})
	c.call(s, "fs_patch", map[string]any{"patch": "--- a/sub/b.txt\n+++ b/sub/b.txt\n@@ -1 +1 @@\n-beta again\n+beta once more\n",
		"if_sha256": map[string]any{"sub/b.txt": sha([]byte("beta again\n"))}, "dry_run": true})
	c.call(s, "fs_patch", map[string]any{"patch": "--- /dev/null\n+++ b/new/dir/n.txt\n@@ -0,0 +1 @@\n+n\n", "dry_run": true})
	c.call(s, "fs_patch", map[string]any{"patch": "--- a/sub2/b.txt\n+++ b/sub2/b.txt\n@@ -1 +1 @@\n-beta again\n+beta once more\n",
		"if_sha256": map[string]any{"sub2/b.txt": sha([]byte("beta again\n"))}})
	d := c.call(s, "fs_delete", map[string]any{"path": "sub2", "recursive": true})
	c.call(s, "fs_undo", map[string]any{"undo": d["undo"]})
	cp := c.call(s, "fs_checkpoint", map[string]any{"label": "structured"})
	c.call(s, "fs_write", map[string]any{"path": "w2.txt", "content": "w\n", "if_sha256": nil})
	c.call(s, "fs_rewind", map[string]any{"id": cp["id"], "dry_run": true})
	c.call(s, "fs_rewind", map[string]any{"id": cp["id"]})
	c.call(s, "fs_checkpoints", map[string]any{})
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.call(s, "fs_rewind", map[string]any{"id": cp["id"]})
	c.call(s, "fs_exec", map[string]any{"argv": []string{"cat", "a.txt"}})
	c.call(s, "fs_vcs_status", map[string]any{"backend": "git", "path": "repo"})
	c.call(s, "fs_vcs_diff", map[string]any{"backend": "git", "path": "repo"})

	// Refusals: the worker's, the front-end's, the validator's, and the
	// stdio layer's for arguments over what the tool takes.
	c.call(s, "fs_read", map[string]any{"path": "../x"})
	c.call(s, "fs_read", map[string]any{"path": "missing.txt"})
	c.call(s, "fs_write", map[string]any{"path": "no/dir/f.txt", "content": "x", "if_sha256": nil})
	c.call(s, "fs_write", map[string]any{"path": "a.txt", "content": "x", "if_sha256": strings.Repeat("0", 64)})
	c.call(s, "fs_replace", map[string]any{"path": "sub/b.txt", "if_sha256": sha([]byte("beta again\n")),
		"edits": []map[string]any{{"old": "Beta again", "new": "x"}}})
	c.call(s, "fs_grep", map[string]any{"path": "", "pattern": "(", "max_results": 0})
	c.call(s, "fs_stat", map[string]any{"path": strings.Repeat("x", 1<<20+1)})

	for name := range c.schemas {
		if !c.ok[name] {
			t.Errorf("%s: no successful reply was checked", name)
		}
	}
	for _, want := range []string{"fs_read outside_root", "fs_read not_found", "fs_write not_found",
		"fs_write precondition_failed", "fs_replace no_match", "fs_grep invalid_argument", "fs_stat invalid_argument"} {
		if !c.codes[want] {
			t.Errorf("no %s reply was checked (checked: %v)", want, c.codes)
		}
	}
	// The document takes half the bound: a page cut there is close to
	// half, never over.
	if n, _ := json.Marshal(big); big["truncated"] != true || len(n) < max/2*3/4 {
		t.Errorf("fs_read of 64 KiB under --structured-content: %d bytes, truncated %v; want cut near %d", len(n), big["truncated"], max/2)
	}

	// Without the flag: no outputSchema, no structuredContent.
	plain := start(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for tool, err := range plain.session.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.OutputSchema != nil {
			t.Errorf("%s declares an outputSchema without --structured-content", tool.Name)
		}
	}
	res, err := plain.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": ""}})
	if err != nil || res.StructuredContent != nil {
		t.Errorf("fs_stat without --structured-content: %v, structuredContent %v", err, res.StructuredContent)
	}
}
