package frontend

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

func TestWriteCreateAndReplace(t *testing.T) {
	root, _ := fronttest.Tree(t)
	s := start(t, root)
	p := filepath.Join(root, "new.txt")

	r := s.wantOK("fs_write", map[string]any{"path": "new.txt", "content": "one\n", "if_sha256": nil})
	if r.Str("sha256") != fronttest.SHA([]byte("one\n")) || r.Num("size") != 4 || r.Doc["created"] != true || r.Doc["broke_hard_link"] != false {
		t.Errorf("fs_write(create) = %s", r.Text)
	}
	if got := fronttest.ReadFile(t, p); string(got) != "one\n" {
		t.Errorf("new.txt = %q", got)
	}
	r = s.wantOK("fs_write", map[string]any{"path": "new.txt", "content": "two\n", "if_sha256": fronttest.SHA([]byte("one\n"))})
	if r.Str("sha256") != fronttest.SHA([]byte("two\n")) || r.Doc["created"] != false {
		t.Errorf("fs_write(replace) = %s", r.Text)
	}
	// The reported sha256 is what fs_stat reports.
	if st := s.wantOK("fs_stat", map[string]any{"path": "new.txt"}); st.Str("sha256") != r.Str("sha256") {
		t.Errorf("fs_stat sha256 %s, fs_write said %s", st.Str("sha256"), r.Str("sha256"))
	}
	raw := []byte("\x00\xff\xfe binary\r\n")
	s.wantOK("fs_write", map[string]any{"path": "new.txt", "content": base64.StdEncoding.EncodeToString(raw),
		"encoding": "base64", "if_sha256": fronttest.SHA([]byte("two\n"))})
	if got := fronttest.ReadFile(t, p); !bytes.Equal(got, raw) {
		t.Errorf("after base64 write: %q", got)
	}
	// A leading slash is stripped, like everywhere else.
	s.wantOK("fs_write", map[string]any{"path": "/new.txt", "content": "three", "if_sha256": fronttest.SHA(raw)})
	// Empty content is a file too.
	s.wantOK("fs_write", map[string]any{"path": "empty", "content": "", "if_sha256": nil})
	if fi, err := os.Stat(filepath.Join(root, "empty")); err != nil || fi.Size() != 0 {
		t.Errorf("empty: %v %v", fi, err)
	}

	// Preconditions.
	r = s.wantErr("fs_write", map[string]any{"path": "new.txt", "content": "x", "if_sha256": fronttest.SHA([]byte("stale"))}, "precondition_failed")
	if e := r.Doc["error"].(map[string]any); e["current_sha256"] != fronttest.SHA([]byte("three")) {
		t.Errorf("precondition_failed without the current sha256: %s", r.Text)
	}
	r = s.wantErr("fs_write", map[string]any{"path": "new.txt", "content": "x", "if_sha256": nil}, "precondition_failed")
	if e := r.Doc["error"].(map[string]any); e["current_sha256"] != fronttest.SHA([]byte("three")) || !strings.Contains(e["message"].(string), "exists") {
		t.Errorf("create over an existing file: %s", r.Text)
	}
	r = s.wantErr("fs_write", map[string]any{"path": "missing.txt", "content": "x", "if_sha256": fronttest.SHA([]byte("x"))}, "precondition_failed")
	if !strings.Contains(r.Text, "does not exist") {
		t.Errorf("write to a missing file with a sha256: %s", r.Text)
	}
	if _, err := os.Lstat(filepath.Join(root, "missing.txt")); !os.IsNotExist(err) {
		t.Errorf("missing.txt was created: %v", err)
	}
	if got := fronttest.ReadFile(t, p); string(got) != "three" {
		t.Errorf("a refused write changed the file: %q", got)
	}

	// Arguments refused before anything reaches the worker.
	for _, args := range []map[string]any{
		{"path": "new.txt", "content": "x"}, // if_sha256 absent
		{"path": "new.txt", "content": "x", "if_sha256": strings.ToUpper(fronttest.SHA([]byte("three")))},
		{"path": "new.txt", "content": "x", "if_sha256": "abc"},
		{"path": "new.txt", "content": "x", "if_sha256": 5},
		{"content": "x", "if_sha256": nil},
		{"path": "new.txt", "if_sha256": nil},
		{"path": "new.txt", "content": "x", "if_sha256": nil, "encoding": "latin1"},
		{"path": "new.txt", "content": "%%%", "if_sha256": nil, "encoding": "base64"},
		{"path": "new.txt", "content": "x", "if_sha256": nil, "mode": "0777"},
	} {
		s.wantErr("fs_write", args, "invalid_argument")
	}
	if got := fronttest.ReadFile(t, p); string(got) != "three" {
		t.Errorf("a refused write changed the file: %q", got)
	}
	fronttest.NoTempFiles(t, root)
}

// Every path a write must refuse, for fs_write and fs_replace: nothing is
// written through or over a link, nothing outside the root, and the
// refused target is unchanged.
func TestWriteRefusals(t *testing.T) {
	root, outside := fronttest.Tree(t)
	if err := os.Symlink("sub", filepath.Join(root, "dirlink_in")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	beforeOut := fronttest.Snapshot(t, outside)
	beforeRoot := fronttest.Snapshot(t, root)
	cases := []struct{ path, code string }{
		{"link_in", "not_regular"},
		{"link_out", "not_regular"},
		{"abs_in", "not_regular"},
		{"dangling", "not_regular"},
		{"dirlink_out", "not_regular"},
		{"dirlink_in", "not_regular"},
		{"fifo", "not_regular"},
		{"sub", "is_a_directory"},
		{"", "invalid_argument"},
		{".", "invalid_argument"},
		{"sub/..", "invalid_argument"},
		{"a.txt/", "invalid_argument"},
		{fronttest.TempPrefix + "x", "invalid_argument"},
		{"sub/" + fronttest.TempPrefix + "x", "invalid_argument"},
		{"dirlink_out/secret.txt", "outside_root"},
		{"dirlink_out/new.txt", "outside_root"},
		{"../outside/secret.txt", "outside_root"},
		{"sub/../../outside/new.txt", "outside_root"},
		{"nope/x", "not_found"},
		{"a.txt/x", "not_a_directory"},
	}
	for _, c := range cases {
		for _, hash := range []any{nil, fronttest.SHA([]byte("hello\n")), fronttest.SHA([]byte("outside secret\n"))} {
			done := make(chan fronttest.Reply, 1)
			go func() {
				done <- s.call("fs_write", map[string]any{"path": c.path, "content": "x", "if_sha256": hash})
			}()
			var r fronttest.Reply
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("fs_write(%q) blocked", c.path)
			}
			if r.Code() != c.code {
				t.Errorf("fs_write(%q, %v) = %s, want %s", c.path, hash, r.Text, c.code)
			}
			fronttest.NoHostPath(t, r.Text, root)
		}
		if hash := fronttest.SHA([]byte("hello\n")); true {
			r := s.call("fs_replace", map[string]any{"path": c.path, "if_sha256": hash,
				"edits": []any{map[string]any{"old": "hello", "new": "bye"}}})
			if r.Code() != c.code {
				t.Errorf("fs_replace(%q) = %s, want %s", c.path, r.Text, c.code)
			}
		}
	}
	fronttest.SameSnapshot(t, "the outside tree", beforeOut, fronttest.Snapshot(t, outside))
	fronttest.SameSnapshot(t, "the root", beforeRoot, fronttest.Snapshot(t, root))
	fronttest.NoTempFiles(t, root)
}
