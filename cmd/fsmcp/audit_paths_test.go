package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// auditCalls holds one call of every tool, naming paths in each way its
// schema takes them.
var auditCalls = map[string]map[string]any{
	"fs_stat":        {"path": "/a.txt"},
	"fs_list":        {"path_base64": "c3Vi"},
	"fs_read":        {"path": "sub/b.txt"},
	"fs_read_many":   {"paths": []any{"a.txt", "/sub/b.txt", map[string]any{"path_base64": "/w=="}}},
	"fs_glob":        {"path": "sub", "pattern": "*.txt"},
	"fs_grep":        {"path": "sub", "pattern": "bee"},
	"fs_tree":        {"path": "sub"},
	"fs_view":        {"path": "a.txt"},
	"fs_write":       {"path": "w.txt", "content": "x", "if_sha256": nil},
	"fs_replace":     {"path": "a.txt", "edits": []any{map[string]any{"old": "nope", "new": "y"}}, "if_sha256": sha([]byte("hello\n"))},
	"fs_mkdir":       {"path": "d1/d2"},
	"fs_move":        {"from": "w.txt", "to_base64": "bW92ZWQ="},
	"fs_delete":      {"path": "moved"},
	"fs_splice":      {"path": "a.txt", "offset": 0, "insert": "z", "if_sha256": sha([]byte("stale"))},
	"fs_patch":       {"patch": "--- a/sub/b.txt\n+++ b/sub/b.txt\n@@ -1 +1 @@\n-bee\n+bea\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-nope\n+x\n", "if_sha256": map[string]any{"sub/b.txt": sha([]byte("bee\n")), "a.txt": sha([]byte("hello\n"))}},
	"fs_copy":        {"from": "sub", "to": "sub2", "recursive": true},
	"fs_digest":      {"path": "sub2"},
	"fs_undo":        {"undo": "not-a-token"},
	"fs_checkpoint":  {"label": "audit"},
	"fs_checkpoints": {},
	"fs_rewind":      {"id": "0000000000000000", "path": "sub", "keep": []any{"sub/b.txt"}, "dry_run": true},
	"fs_exec":        {"argv": []any{"cat"}, "cwd": "sub"},
	"fs_vcs_status":  {"backend": "git", "path": "sub", "files": []any{"b.txt"}},
	"fs_vcs_diff":    {"backend": "git", "path_base64": "c3Vi", "files": []any{"b.txt", "c.txt"}},
}

// wantAuditPaths is what the audit line of a call with args must name,
// read from the tool's input schema: every property with a _base64 twin
// (the path as the worker resolves it, one leading "/" stripped, under the
// property's name, as text when it is UTF-8), every array of paths (paths, files) and the keys of a
// path-keyed object (fs_patch's if_sha256, as files).
func wantAuditPaths(t *testing.T, tool *mcp.Tool, args map[string]any) map[string]any {
	t.Helper()
	schema, ok := tool.InputSchema.(map[string]any)
	if !ok {
		t.Fatalf("%s: input schema %T", tool.Name, tool.InputSchema)
	}
	props, _ := schema["properties"].(map[string]any)
	want := map[string]any{}
	strip := func(v any) any {
		if s, ok := v.(string); ok {
			return strings.TrimPrefix(s, "/")
		}
		return v
	}
	for k, v := range args {
		base := strings.TrimSuffix(k, "_base64")
		_, twin := props[base+"_base64"]
		prop, _ := props[k].(map[string]any)
		switch {
		case twin && prop["type"] == "object":
			keys := slices.Sorted(func(yield func(string) bool) {
				for key := range v.(map[string]any) {
					if !yield(key) {
						return
					}
				}
			})
			var files []any
			for _, key := range keys {
				files = append(files, key)
			}
			want["files"] = files
		case twin && k != base:
			// A name that is UTF-8 is named as text.
			if b, err := base64.StdEncoding.DecodeString(v.(string)); err == nil && utf8.Valid(b) {
				want[base] = strip(string(b))
			} else {
				want[k] = v
			}
		case twin:
			want[k] = strip(v)
		case prop["type"] == "array" && (k == "paths" || k == "files" || k == "keep"):
			var items []any
			for _, it := range v.([]any) {
				items = append(items, strip(it))
			}
			want[k] = items
		}
	}
	if len(want) == 0 {
		return nil
	}
	return want
}

// TestAuditNamesEveryPath: the audit line of a call of every tool the
// server lists names every path the call names, as its schema shows it:
// fs_read_many's paths, fs_exec's cwd, fs_patch's files, copy and move's
// both ends, fs_vcs_*'s files. A tool without a call here fails the test.
func TestAuditNamesEveryPath(t *testing.T) {
	root, _ := tree(t)
	qdir := filepath.Join(filepath.Dir(root), "quarantine")
	if err := os.Mkdir(qdir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--exec", "/usr/bin/cat", "--vcs", "git", "--quarantine", qdir)
	res, err := s.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []*mcp.Tool
	for _, tl := range res.Tools {
		if _, ok := auditCalls[tl.Name]; !ok {
			t.Errorf("%s has no call in auditCalls", tl.Name)
			continue
		}
		order = append(order, tl)
	}
	if len(order) != len(auditCalls) {
		t.Errorf("the server lists %d of the %d tools auditCalls covers", len(order), len(auditCalls))
	}
	for _, tl := range order {
		s.call(tl.Name, auditCalls[tl.Name])
	}
	// Only the tool and the paths: fs_exec's line carries argv and how
	// the command ended besides, which auditEntry does not know.
	type entry struct {
		Tool  string         `json:"tool"`
		Paths map[string]any `json:"paths"`
	}
	var entries []entry
	waitFor(t, func() bool {
		entries = nil
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			var e entry
			if strings.HasPrefix(line, `{"time":`) && json.Unmarshal([]byte(line), &e) == nil {
				entries = append(entries, e)
			}
		}
		return len(entries) >= len(order)
	})
	for i, tl := range order {
		e := entries[i]
		want := wantAuditPaths(t, tl, auditCalls[tl.Name])
		if e.Tool != tl.Name || fmt.Sprint(e.Paths) != fmt.Sprint(want) {
			t.Errorf("%s(%v): audit line names %s %v, want %v", tl.Name, auditCalls[tl.Name], e.Tool, e.Paths, want)
		}
	}
}
