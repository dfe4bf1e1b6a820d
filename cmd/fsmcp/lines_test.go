package main

import (
	"path/filepath"
	"testing"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

// content returns the bytes of a read reply's content.
func content(t testing.TB, r reply) []byte {
	t.Helper()
	return fronttest.Content(t, fronttest.Reply{Doc: r.doc})
}

// TestReadLinesAgreeWithGrep reads every line fs_grep reports, by its
// line_number, and wants the same bytes at the same offset: CRLF, no final
// newline, NUL bytes and invalid UTF-8 included.
func TestReadLinesAgreeWithGrep(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"crlf":      "alpha\r\nbeta\r\n\r\ngamma\r\n",
		"nofinal":   "alpha\nbeta\n\ngamma",
		"nul":       "alpha\x00\nbe\x00ta\n\x00\ngamma\n",
		"invalid":   "al\xffpha\nbeta\xc3\n\xe2\x82\ngamma\xff",
		"empty":     "",
		"onenl":     "\n",
		"bareCR":    "a\rb\rc\n\rd",
		"blanklast": "x\n\n",
	}
	for name, body := range files {
		writeFile(t, filepath.Join(root, name), []byte(body), 0o644)
	}
	s := start(t, root)
	for name, body := range files {
		lines := fileLines([]byte(body))
		// "^" matches every line, empty ones too.
		g := s.wantOK("fs_grep", map[string]any{"path": name, "pattern": "^"})
		got := grepPage(t, g)
		if len(got) != len(lines) {
			t.Errorf("%s: fs_grep found %d lines, the file has %d", name, len(got), len(lines))
		}
		for _, l := range got {
			r := s.wantOK("fs_read", map[string]any{"path": name, "line": l.LineNumber, "lines": 1})
			if r.num("offset") != l.Offset || string(content(t, r)) != l.Text || r.num("first_line") != l.LineNumber {
				t.Errorf("%s: fs_grep has line %d at %d %q; fs_read has it at %d %q", name, l.LineNumber, l.Offset, l.Text,
					r.num("offset"), content(t, r))
			}
			if int(l.LineNumber) <= len(lines) && l.Text != string(lines[l.LineNumber-1]) {
				t.Errorf("%s: line %d is %q, fs_grep says %q", name, l.LineNumber, lines[l.LineNumber-1], l.Text)
			}
		}
		for k := 1; k <= len(lines); k++ {
			r := s.wantOK("fs_read", map[string]any{"path": name, "line": -k, "lines": 1})
			if want := lines[len(lines)-k]; string(content(t, r)) != string(want) || r.num("first_line") != int64(len(lines)-k+1) {
				t.Errorf("%s: line %d = %s, want line %d %q", name, -k, r.text, len(lines)-k+1, want)
			}
		}
	}
}
