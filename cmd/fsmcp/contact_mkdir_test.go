package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A call that would create a name in a directory that does not exist
// answers not_found naming that directory and fs_mkdir, under the names
// the client was given; once fs_mkdir made it, the same call succeeds. A
// not_found that fs_mkdir would not cure carries no such hint. fs_patch
// needs no fs_mkdir: it makes the directories, as git apply does.
func TestContactMissingDirectoryHint(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--tools-prefix", "fsx_")
	hinted := func(r reply, dir string) {
		t.Helper()
		e := r.doc["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if e["missing_directory"] != dir || !strings.Contains(msg, "create it with fsx_fs_mkdir") {
			t.Errorf("not_found = %s, want missing_directory %q and a message naming fsx_fs_mkdir", r.text, dir)
		}
	}
	newFile := "--- /dev/null\n+++ b/p/q/new.txt\n@@ -0,0 +1 @@\n+new\n"
	calls := []struct {
		tool string
		args map[string]any
		dir  string
	}{
		{"fs_write", map[string]any{"path": "a/b/new.txt", "content": "x", "if_sha256": nil}, "a/b"},
		{"fs_copy", map[string]any{"from": "f.txt", "to": "c/d/f.txt"}, "c/d"},
		{"fs_move", map[string]any{"from": "f.txt", "to": "m/f.txt"}, "m"},
	}
	s.wantOK("fsx_fs_patch", map[string]any{"patch": newFile, "if_sha256": map[string]any{"p/q/new.txt": nil}})
	if b, err := os.ReadFile(filepath.Join(root, "p", "q", "new.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("fs_patch into missing directories: %q, %v", b, err)
	}
	for _, c := range calls {
		hinted(s.wantErr("fsx_"+c.tool, c.args, "not_found"), c.dir)
	}
	for _, c := range calls {
		s.wantOK("fsx_fs_mkdir", map[string]any{"path": c.dir})
		s.wantOK("fsx_"+c.tool, c.args)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"fs_delete", map[string]any{"path": "z/y/f.txt"}},
		{"fs_write", map[string]any{"path": "z/y/f.txt", "content": "x",
			"if_sha256": "0000000000000000000000000000000000000000000000000000000000000000"}},
		{"fs_copy", map[string]any{"from": "z/f.txt", "to": "g.txt"}},
	} {
		r := s.wantErr("fsx_"+c.tool, c.args, "not_found")
		if strings.Contains(r.text, "missing_directory") || strings.Contains(r.text, "fs_mkdir") {
			t.Errorf("%s %v = %s: a hint fs_mkdir would not act on", c.tool, c.args, r.text)
		}
	}
}
