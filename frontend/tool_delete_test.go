package frontend

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

func TestDelete(t *testing.T) {
	root, outside := fronttest.Tree(t)
	s := start(t, root)
	before := fronttest.Snapshot(t, outside)
	gone := func(rel string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(root, rel)); !os.IsNotExist(err) {
			t.Errorf("%s still exists: %v", rel, err)
		}
	}
	r := s.wantOK("fs_delete", map[string]any{"path": "a.txt"})
	if r.Num("removed") != 1 {
		t.Errorf("fs_delete(a.txt) = %s", r.Text)
	}
	gone("a.txt")
	// Symlinks go, their targets stay.
	for _, l := range []string{"link_out", "dirlink_out", "abs_in", "dangling", "link_in", "fifo"} {
		s.wantOK("fs_delete", map[string]any{"path": l})
		gone(l)
	}
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	s.wantOK("fs_delete", map[string]any{"path": "empty"})
	gone("empty")
	s.wantErr("fs_delete", map[string]any{"path": "sub"}, "not_empty")
	s.wantErr("fs_delete", map[string]any{"path": "sub", "recursive": false}, "not_empty")
	// A tree with a symlink to outside in it.
	os.MkdirAll(filepath.Join(root, "sub/deep/deeper"), 0o755)
	os.Symlink("../../../outside", filepath.Join(root, "sub/deep/out"))
	os.Symlink(outside, filepath.Join(root, "sub/deep/deeper/abs"))
	fronttest.WriteFile(t, filepath.Join(root, "sub/deep/deeper/f"), []byte("x"), 0o644)
	r = s.wantOK("fs_delete", map[string]any{"path": "sub", "recursive": true})
	// sub, b.txt, up, deep, out, deeper, abs, f
	if r.Num("removed") != 8 {
		t.Errorf("fs_delete(sub, recursive) = %s, want removed 8", r.Text)
	}
	gone("sub")
	for _, c := range []struct{ path, code string }{
		{"", "invalid_argument"},
		{".", "invalid_argument"},
		{"/", "invalid_argument"},
		{"x/..", "invalid_argument"},
		{"nope", "not_found"},
		{"../outside/secret.txt", "outside_root"},
		{"../outside", "outside_root"},
		{fronttest.TempPrefix + "x", "invalid_argument"},
	} {
		s.wantErr("fs_delete", map[string]any{"path": c.path, "recursive": true}, c.code)
	}
	s.wantErr("fs_delete", map[string]any{}, "invalid_argument")
	fronttest.SameSnapshot(t, "the outside tree", before, fronttest.Snapshot(t, outside))
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("the root is gone: %v", err)
	}
}
