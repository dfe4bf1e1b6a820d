package frontend

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

// fs_read_many under a 4 KiB bound, with good, missing, escaping, binary,
// oversized and directory entries: the entries come in order, each ok or
// its own error; following complete, next_offset and the paths left out
// yields every file whole.
func TestReadManyMix(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	fronttest.WriteFile(t, filepath.Join(base, "secret"), []byte("outside secret"), 0o644)
	files := map[string][]byte{
		"a.txt":   []byte("alpha\n"),
		"b.bin":   {0xff, 0x00, 0xfe, 'b', '\n'},
		"big.txt": bytes.Repeat([]byte("0123456789abcdef\n"), 700), // 11.9 KB
		"c.txt":   []byte(strings.Repeat("\u00e9", 900)),           // 1.8 KB
		"empty":   {},
		"d.txt":   []byte("delta\n"),
	}
	for name, b := range files {
		fronttest.WriteFile(t, filepath.Join(root, name), b, 0o644)
	}
	if err := os.Symlink("../secret", filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	paths := []string{"a.txt", "missing", "b.bin", "../secret", "big.txt", "out", "c.txt", "dir", "empty", "d.txt"}
	wantErr := map[string]string{"missing": "not_found", "../secret": "outside_root", "out": "outside_root", "dir": "is_a_directory"}
	s := start(t, root, "--max-response-bytes", "4096")

	got := map[string][]byte{}
	errs := map[string]string{}
	var order []string
	left := paths
	for calls := 0; len(left) > 0; calls++ {
		if calls > 50 {
			t.Fatal("no progress")
		}
		args := []any{}
		for _, p := range left {
			args = append(args, p)
		}
		r := s.wantOK("fs_read_many", map[string]any{"paths": args})
		if len(r.Text) > 4096 {
			t.Fatalf("reply of %d bytes", len(r.Text))
		}
		fronttest.NoHostPath(t, r.Text, base)
		if strings.Contains(r.Text, "outside secret") {
			t.Fatal("the outside file was read")
		}
		entries := r.Doc["files"].([]any)
		complete := int(r.Num("complete"))
		if complete > len(entries) || len(entries) == 0 {
			t.Fatalf("complete %d of %d entries", complete, len(entries))
		}
		for i, x := range entries {
			m := x.(map[string]any)
			p := m["path"].(string)
			if p != left[i] {
				t.Fatalf("entry %d is %s, asked %s", i, p, left[i])
			}
			order = append(order, p)
			if m["ok"] != true {
				e := m["error"].(map[string]any)
				errs[p] = e["code"].(string)
				if i >= complete {
					t.Fatalf("an error entry counted as cut: %v", m)
				}
				continue
			}
			entry := fronttest.Reply{Doc: m}
			got[p] = append(got[p], fronttest.Content(t, entry)...)
			if m["sha256"] != fronttest.SHA(files[p]) {
				t.Errorf("%s: sha256 %v", p, m["sha256"])
			}
			if i < complete {
				if m["truncated"] == true || m["eof"] != true {
					t.Fatalf("%s counted whole: %v", p, m)
				}
				continue
			}
			// The cut entry: continue it with fs_read.
			if i != len(entries)-1 || m["truncated"] != true {
				t.Fatalf("%s: a cut entry that is not the last: %v", p, m)
			}
			for off := entry.Num("next_offset"); ; {
				rr := s.wantOK("fs_read", map[string]any{"path": p, "offset": off, "if_sha256": fronttest.SHA(files[p])})
				got[p] = append(got[p], fronttest.Content(t, rr)...)
				if rr.Doc["eof"] == true {
					break
				}
				off = rr.Num("next_offset")
			}
		}
		left = left[len(entries):]
		if len(left) > 0 && r.Doc["truncated"] != true {
			t.Fatalf("paths left out without truncated: %s", r.Text)
		}
	}
	if strings.Join(order, ",") != strings.Join(paths, ",") {
		t.Errorf("order %v, asked %v", order, paths)
	}
	for name, b := range files {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s: read %d bytes, the file has %d", name, len(got[name]), len(b))
		}
	}
	for p, code := range wantErr {
		if errs[p] != code {
			t.Errorf("%s: error %q, want %s", p, errs[p], code)
		}
	}
	// length bounds each file; base64 twins address names; bad entries
	// are the call's refusal.
	r := s.wantOK("fs_read_many", map[string]any{"paths": []any{"big.txt", map[string]any{"path_base64": "YS50eHQ="}}, "length": 5})
	es := r.Doc["files"].([]any)
	if len(es) != 2 || r.Num("complete") != 2 || es[0].(map[string]any)["content"] != "01234" || es[1].(map[string]any)["content"] != "alpha" ||
		es[0].(map[string]any)["next_offset"] != float64(5) {
		t.Errorf("length 5 = %s", r.Text)
	}
	many := make([]any, 65)
	for i := range many {
		many[i] = "a.txt"
	}
	for _, bad := range []map[string]any{
		{"paths": []any{}}, {"paths": many}, {"paths": []any{3}}, {"paths": []any{map[string]any{"path": "a.txt"}}},
		{"paths": []any{"a.txt"}, "length": -1}, {},
	} {
		s.wantErr("fs_read_many", bad, "invalid_argument")
	}
}

// An entry refused as outside_root or by the policy marks the whole
// fs_read_many result with the _meta a relay audits, as a lone fs_read's
// refusal would; a call of ordinary entries carries none.
func TestReadManyViolationMeta(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	fronttest.WriteFile(t, filepath.Join(base, "secret"), []byte("outside secret"), 0o644)
	fronttest.WriteFile(t, filepath.Join(root, "a.txt"), []byte("alpha\n"), 0o644)
	fronttest.WriteFile(t, filepath.Join(root, "id.key"), []byte("private\n"), 0o644)
	s := start(t, root, "--deny", "*.key")

	r := s.wantOK("fs_read_many", map[string]any{"paths": []any{"a.txt", "missing"}})
	if len(r.Meta) != 0 {
		t.Fatalf("ordinary entries: _meta %v", r.Meta)
	}
	r = s.wantOK("fs_read_many", map[string]any{"paths": []any{"a.txt", "../secret"}})
	if r.Meta["scope_violation"] != true || r.Meta["policy_violation"] != nil {
		t.Fatalf("escaping entry: _meta %v", r.Meta)
	}
	r = s.wantOK("fs_read_many", map[string]any{"paths": []any{"id.key", "a.txt"}})
	if r.Meta["policy_violation"] != true || r.Meta["scope_violation"] != nil {
		t.Fatalf("denied entry: _meta %v", r.Meta)
	}
	if strings.Contains(r.Text, "private") {
		t.Fatal("the denied file was read")
	}
}
