package frontend

import (
	"bytes"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

// fs_replace works on bytes: whatever it does not touch survives exactly.
func TestReplaceBytesSurvive(t *testing.T) {
	root, _ := fronttest.Tree(t)
	s := start(t, root)
	cases := map[string]string{
		"bom.txt":     "\xef\xbb\xbfhead\nTARGET\ntail\n",
		"crlf.txt":    "one\r\nTARGET\r\nthree\r\n",
		"nonl.txt":    "no final newline TARGET",
		"invalid.txt": "\xff\xfe\x80 TARGET \xc3(",
		"nul.txt":     "a\x00b\x00TARGET\x00\x00",
		"mixed.txt":   "\xef\xbb\xbfx\r\ny\nTARGET\r\n\x00\xff",
	}
	for name, content := range cases {
		fronttest.WriteFile(t, filepath.Join(root, name), []byte(content), 0o644)
		r := s.wantOK("fs_replace", map[string]any{"path": name, "if_sha256": fronttest.SHA([]byte(content)),
			"edits": []any{map[string]any{"old": "TARGET", "new": "done"}}})
		want := strings.Replace(content, "TARGET", "done", 1)
		got := fronttest.ReadFile(t, filepath.Join(root, name))
		if string(got) != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
		if r.Num("replacements") != 1 || r.Str("sha256") != fronttest.SHA([]byte(want)) || r.Num("size") != int64(len(want)) {
			t.Errorf("%s: reply %s", name, r.Text)
		}
	}
	// base64 edits can address bytes that are not UTF-8.
	p := filepath.Join(root, "invalid.txt")
	cur := fronttest.ReadFile(t, p)
	b64 := base64.StdEncoding.EncodeToString
	s.wantOK("fs_replace", map[string]any{"path": "invalid.txt", "if_sha256": fronttest.SHA(cur), "encoding": "base64",
		"edits": []any{map[string]any{"old": b64([]byte("\xff\xfe\x80")), "new": b64([]byte("\x00\x01"))}}})
	if got := fronttest.ReadFile(t, p); string(got) != "\x00\x01 done \xc3(" {
		t.Errorf("after base64 edit: %q", got)
	}
	// fs_write keeps bytes too.
	raw := []byte("\xef\xbb\xbfA\r\nB\x00\xff")
	s.wantOK("fs_write", map[string]any{"path": "w.bin", "content": b64(raw), "encoding": "base64", "if_sha256": nil})
	if got := fronttest.ReadFile(t, filepath.Join(root, "w.bin")); !bytes.Equal(got, raw) {
		t.Errorf("fs_write base64: %q", got)
	}
	s.wantOK("fs_write", map[string]any{"path": "crlf2.txt", "content": "x\r\ny\r\n", "if_sha256": nil})
	if got := fronttest.ReadFile(t, filepath.Join(root, "crlf2.txt")); string(got) != "x\r\ny\r\n" {
		t.Errorf("fs_write utf8 CRLF: %q", got)
	}
}

func TestReplaceEdits(t *testing.T) {
	root, _ := fronttest.Tree(t)
	s := start(t, root)
	p := filepath.Join(root, "e.txt")
	content := "foo bar foo baz foo\n"
	fronttest.WriteFile(t, p, []byte(content), 0o644)
	edit := func(old, nw string, all ...bool) map[string]any {
		m := map[string]any{"old": old, "new": nw}
		if len(all) > 0 {
			m["all"] = all[0]
		}
		return m
	}
	unchanged := func() {
		t.Helper()
		if got := fronttest.ReadFile(t, p); string(got) != content {
			t.Fatalf("a refused replace changed the file: %q", got)
		}
	}
	h := fronttest.SHA([]byte(content))
	r := s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h, "edits": []any{edit("foo", "x")}}, "ambiguous_match")
	if e := r.Doc["error"].(map[string]any); e["count"] != float64(3) {
		t.Errorf("ambiguous_match without count 3: %s", r.Text)
	}
	unchanged()
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h, "edits": []any{edit("nope", "x")}}, "no_match")
	unchanged()
	// All or nothing: the first edit would apply, the second fails.
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h,
		"edits": []any{edit("bar", "BAR"), edit("missing", "x")}}, "no_match")
	unchanged()
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h,
		"edits": []any{edit("bar", "BAR"), edit("foo", "x")}}, "ambiguous_match")
	unchanged()
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h, "edits": []any{edit("", "x")}}, "invalid_argument")
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h, "edits": []any{}}, "invalid_argument")
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h, "edits": nil}, "invalid_argument")
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "edits": []any{edit("bar", "x")}}, "invalid_argument")
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h, "edits": []any{map[string]any{"old": "bar"}}}, "invalid_argument")
	s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h, "edits": []any{edit("bar", "x")}, "encoding": "hex"}, "invalid_argument")
	r = s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": fronttest.SHA([]byte("stale")), "edits": []any{edit("bar", "x")}}, "precondition_failed")
	if e := r.Doc["error"].(map[string]any); e["current_sha256"] != h {
		t.Errorf("precondition_failed without current_sha256: %s", r.Text)
	}
	r = s.wantErr("fs_replace", map[string]any{"path": "e.txt", "if_sha256": nil, "edits": []any{edit("bar", "x")}}, "precondition_failed")
	if e := r.Doc["error"].(map[string]any); e["current_sha256"] != h {
		t.Errorf("precondition_failed without current_sha256: %s", r.Text)
	}
	s.wantErr("fs_replace", map[string]any{"path": "gone.txt", "if_sha256": nil, "edits": []any{edit("bar", "x")}}, "not_found")
	s.wantErr("fs_replace", map[string]any{"path": "gone.txt", "if_sha256": h, "edits": []any{edit("bar", "x")}}, "precondition_failed")
	unchanged()

	// Edits apply in order: the second sees the first's result.
	r = s.wantOK("fs_replace", map[string]any{"path": "e.txt", "if_sha256": h,
		"edits": []any{edit("foo", "qux", true), edit("bar qux", "BQ"), edit("qux\n", "end\n")}})
	want := "qux BQ baz end\n"
	if got := fronttest.ReadFile(t, p); string(got) != want {
		t.Errorf("after ordered edits: %q, want %q", got, want)
	}
	if r.Num("replacements") != 5 || r.Str("sha256") != fronttest.SHA([]byte(want)) || r.Num("size") != int64(len(want)) {
		t.Errorf("reply %s", r.Text)
	}
	fronttest.NoTempFiles(t, root)
}
