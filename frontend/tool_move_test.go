package frontend

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

func TestMove(t *testing.T) {
	root, outside := fronttest.Tree(t)
	s := start(t, root)
	before := fronttest.Snapshot(t, outside)
	s.wantOK("fs_move", map[string]any{"from": "a.txt", "to": "sub/moved.txt"})
	if got := fronttest.ReadFile(t, filepath.Join(root, "sub/moved.txt")); string(got) != "hello\n" {
		t.Errorf("moved file = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt still exists: %v", err)
	}
	// Never replaces.
	s.wantErr("fs_move", map[string]any{"from": "sub/moved.txt", "to": "sub/b.txt"}, "already_exists")
	if got := fronttest.ReadFile(t, filepath.Join(root, "sub/b.txt")); string(got) != "bee\n" {
		t.Errorf("b.txt replaced: %q", got)
	}
	s.wantErr("fs_move", map[string]any{"from": "sub/moved.txt", "to": "sub/moved.txt"}, "already_exists")
	os.Mkdir(filepath.Join(root, "emptydir"), 0o755)
	s.wantErr("fs_move", map[string]any{"from": "sub", "to": "emptydir"}, "already_exists")
	// A symlink moves as itself, whatever it points to.
	s.wantOK("fs_move", map[string]any{"from": "link_out", "to": "sub/link_moved"})
	if target, err := os.Readlink(filepath.Join(root, "sub/link_moved")); err != nil || target != "../outside/secret.txt" {
		t.Errorf("moved link: %q %v", target, err)
	}
	s.wantOK("fs_move", map[string]any{"from": "dirlink_out", "to": "dl"})
	s.wantErr("fs_move", map[string]any{"from": "fifo", "to": "sub/fifo"}, "unsupported")
	// Directories, but never into themselves.
	s.wantOK("fs_mkdir", map[string]any{"path": "d1/d2"})
	s.wantErr("fs_move", map[string]any{"from": "d1", "to": "d1/d2/d1"}, "invalid_argument")
	s.wantErr("fs_move", map[string]any{"from": "d1", "to": "d1/x"}, "invalid_argument")
	s.wantOK("fs_move", map[string]any{"from": "d1", "to": "sub/d1"})
	if fi, err := os.Stat(filepath.Join(root, "sub/d1/d2")); err != nil || !fi.IsDir() {
		t.Errorf("moved directory: %v", err)
	}
	for _, c := range []struct {
		from, to, code string
	}{
		{"", "x", "invalid_argument"},
		{".", "x", "invalid_argument"},
		{"/", "x", "invalid_argument"},
		{"sub/..", "x", "invalid_argument"},
		{"sub/b.txt", "", "already_exists"},
		{"nope", "x", "not_found"},
		{"sub/b.txt", "nope/x", "not_found"},
		{"sub/b.txt", "sub/b.txt/x", "not_a_directory"},
		{"sub/b.txt", "../outside/stolen", "outside_root"},
		{"sub/b.txt", "dl/stolen", "outside_root"},
		{"dl/secret.txt", "here.txt", "outside_root"},
		{"../outside/secret.txt", "here.txt", "outside_root"},
		{"sub/b.txt", fronttest.TempPrefix + "x", "invalid_argument"},
	} {
		s.wantErr("fs_move", map[string]any{"from": c.from, "to": c.to}, c.code)
	}
	s.wantErr("fs_move", map[string]any{"from": "sub/b.txt"}, "invalid_argument")
	fronttest.SameSnapshot(t, "the outside tree", before, fronttest.Snapshot(t, outside))
	if got := fronttest.ReadFile(t, filepath.Join(root, "sub/b.txt")); string(got) != "bee\n" {
		t.Errorf("b.txt = %q", got)
	}
}
