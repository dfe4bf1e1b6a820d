package frontend

import (
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

func TestStat(t *testing.T) {
	root, outside := fronttest.Tree(t)
	s := start(t, root)

	r := s.wantOK("fs_stat", map[string]any{"path": "a.txt"})
	if r.Str("type") != "file" || r.Num("size") != 6 || r.Str("sha256") != fronttest.SHA([]byte("hello\n")) ||
		r.Str("mode") != "0644" || r.Num("nlink") != 1 {
		t.Errorf("fs_stat(a.txt) = %s", r.Text)
	}
	if _, err := time.Parse(time.RFC3339Nano, r.Str("mtime")); err != nil {
		t.Errorf("mtime %q: %v", r.Str("mtime"), err)
	}
	// A leading slash is stripped.
	if r := s.wantOK("fs_stat", map[string]any{"path": "/a.txt"}); r.Str("sha256") != fronttest.SHA([]byte("hello\n")) {
		t.Errorf("fs_stat(/a.txt) = %s", r.Text)
	}
	// lstat semantics: a symlink is reported as itself, never hashed.
	r = s.wantOK("fs_stat", map[string]any{"path": "link_in"})
	if r.Str("type") != "symlink" || r.Str("target") != "a.txt" || r.Doc["sha256"] != nil {
		t.Errorf("fs_stat(link_in) = %s", r.Text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "dangling"})
	if r.Str("target") != "missing" || r.Doc["target_escapes"] != nil {
		t.Errorf("fs_stat(dangling) = %s", r.Text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "sub/up"})
	if r.Str("target") != "../a.txt" {
		t.Errorf("fs_stat(sub/up) = %s", r.Text)
	}
	for _, p := range []string{"link_out", "abs_in", "dirlink_out"} {
		r := s.wantOK("fs_stat", map[string]any{"path": p})
		if r.Doc["target_escapes"] != true || r.Doc["target"] != nil {
			t.Errorf("fs_stat(%s) = %s, want target_escapes and no target", p, r.Text)
		}
		fronttest.NoHostPath(t, r.Text, root)
		fronttest.NoHostPath(t, r.Text, outside)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "fifo"})
	if r.Str("type") != "fifo" || r.Doc["sha256"] != nil {
		t.Errorf("fs_stat(fifo) = %s", r.Text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "sub"})
	if r.Str("type") != "directory" || r.Doc["confinement"] != nil {
		t.Errorf("fs_stat(sub) = %s", r.Text)
	}
	s.wantErr("fs_stat", map[string]any{"path": "nope"}, "not_found")
	s.wantErr("fs_stat", map[string]any{"path": "a.txt/x"}, "not_a_directory")
}
