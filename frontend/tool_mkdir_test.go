package frontend

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

func TestMkdir(t *testing.T) {
	root, outside := fronttest.Tree(t)
	s := start(t, root)
	before := fronttest.Snapshot(t, outside)
	r := s.wantOK("fs_mkdir", map[string]any{"path": "x/y/z"})
	if r.Doc["created"] != true {
		t.Errorf("fs_mkdir(x/y/z) = %s", r.Text)
	}
	if fi, err := os.Stat(filepath.Join(root, "x/y/z")); err != nil || !fi.IsDir() {
		t.Fatalf("x/y/z: %v %v", fi, err)
	}
	r = s.wantOK("fs_mkdir", map[string]any{"path": "x/y/z"})
	if r.Doc["created"] != false {
		t.Errorf("fs_mkdir of an existing directory = %s", r.Text)
	}
	s.wantOK("fs_mkdir", map[string]any{"path": "sub"})
	s.wantOK("fs_mkdir", map[string]any{"path": ""})
	s.wantOK("fs_mkdir", map[string]any{"path": "x/y/z/"})
	s.wantErr("fs_mkdir", map[string]any{"path": "a.txt"}, "already_exists")
	s.wantErr("fs_mkdir", map[string]any{"path": "link_in"}, "already_exists")
	s.wantErr("fs_mkdir", map[string]any{"path": "fifo"}, "already_exists")
	s.wantErr("fs_mkdir", map[string]any{"path": "a.txt/b"}, "not_a_directory")
	s.wantErr("fs_mkdir", map[string]any{"path": "dirlink_out/new"}, "outside_root")
	s.wantErr("fs_mkdir", map[string]any{"path": "../escape"}, "outside_root")
	s.wantErr("fs_mkdir", map[string]any{"path": fronttest.TempPrefix + "d"}, "invalid_argument")
	s.wantErr("fs_mkdir", map[string]any{}, "invalid_argument")
	if _, err := os.Lstat(filepath.Join(root, "../escape")); !os.IsNotExist(err) {
		t.Errorf("../escape was created: %v", err)
	}
	fronttest.SameSnapshot(t, "the outside tree", before, fronttest.Snapshot(t, outside))
}
