package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// content returns the bytes of a read reply's content.
func content(t testing.TB, r reply) []byte {
	t.Helper()
	switch r.str("encoding") {
	case "utf8":
		return []byte(r.str("content"))
	case "base64":
		b, err := base64.StdEncoding.DecodeString(r.str("content"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("encoding %q", r.str("encoding"))
	return nil
}

// fileLines splits b into lines as rg counts them.
func fileLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(out, b)
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

func TestReadLinesFields(t *testing.T) {
	root := t.TempDir()
	body := "one\ntwo\r\nthree\nfour"
	writeFile(t, filepath.Join(root, "f"), []byte(body), 0o644)
	s := start(t, root)

	r := s.wantOK("fs_read", map[string]any{"path": "f", "line": 2, "lines": 2})
	if string(content(t, r)) != "two\r\nthree\n" || r.num("offset") != 4 || r.num("length") != 11 || r.num("size") != int64(len(body)) ||
		r.num("first_line") != 2 || r.num("line_count") != 2 || r.num("next_line") != 4 || r.num("next_offset") != 15 ||
		r.doc["eof"] != false || r.doc["truncated"] != nil || r.str("sha256") != sha([]byte(body)) {
		t.Errorf("line 2, lines 2 = %s", r.text)
	}
	// The last line has no newline and still counts; nothing follows it.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": -1})
	if string(content(t, r)) != "four" || r.num("first_line") != 4 || r.num("line_count") != 1 || r.doc["next_line"] != nil ||
		r.doc["eof"] != true || r.doc["next_offset"] != nil {
		t.Errorf("line -1 = %s", r.text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": -3, "lines": 1})
	if string(content(t, r)) != "two\r\n" || r.num("first_line") != 2 || r.num("next_line") != 3 || r.doc["truncated"] != nil {
		t.Errorf("line -3 = %s", r.text)
	}
	// Without lines: as many as fit, here all of them.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": 1})
	if string(content(t, r)) != body || r.num("line_count") != 4 || r.doc["eof"] != true {
		t.Errorf("line 1 = %s", r.text)
	}
	// A tail longer than the file starts at line 1.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": -100})
	if string(content(t, r)) != body || r.num("first_line") != 1 {
		t.Errorf("line -100 = %s", r.text)
	}
	// Past the end: nothing, at the end.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": 9})
	if len(content(t, r)) != 0 || r.num("first_line") != 9 || r.num("line_count") != 0 || r.num("offset") != int64(len(body)) ||
		r.doc["eof"] != true || r.doc["next_line"] != nil {
		t.Errorf("line 9 = %s", r.text)
	}
	// Byte reads carry the version too.
	if r := s.wantOK("fs_read", map[string]any{"path": "f", "offset": 4}); r.str("sha256") != sha([]byte(body)) || r.doc["first_line"] != nil {
		t.Errorf("offset 4 = %s", r.text)
	}
	for _, bad := range []map[string]any{
		{"path": "f", "line": 0},
		{"path": "f", "line": 1, "offset": 0},
		{"path": "f", "line": 1, "length": 3},
		{"path": "f", "lines": 2},
		{"path": "f", "line": 1, "lines": 0},
		{"path": "f", "if_sha256": "ABC"},
		{"path": "f", "if_sha256": strings.Repeat("A", 64)},
	} {
		s.wantErr("fs_read", bad, "invalid_argument")
	}
	s.wantErr("fs_read", map[string]any{"path": "missing", "line": 1}, "not_found")
	s.wantErr("fs_read", map[string]any{"path": ".", "line": 1}, "is_a_directory")
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

// TestReadLinesWalk walks a 30,000-line file by next_line under a 4 KiB
// reply bound, and back from its end by negative lines.
func TestReadLinesWalk(t *testing.T) {
	root := t.TempDir()
	var b bytes.Buffer
	for i := 1; i <= 30000; i++ {
		switch i % 7 {
		case 0:
			fmt.Fprintf(&b, "line %d \u00e9\u4e16 %s\r\n", i, strings.Repeat("x", i%200))
		case 3:
			fmt.Fprintf(&b, "\n")
		case 5:
			fmt.Fprintf(&b, "bin %d \xff\xfe\n", i)
		default:
			fmt.Fprintf(&b, "line %d \"quoted\"\t%s\n", i, strings.Repeat("y", i%50))
		}
	}
	body := b.Bytes()
	body = body[:len(body)-1] // no final newline
	writeFile(t, filepath.Join(root, "big"), body, 0o644)
	lines := fileLines(body)
	s := start(t, root, "--max-response-bytes", "4096")

	var got []byte
	next, calls := int64(1), 0
	for {
		calls++
		r := s.wantOK("fs_read", map[string]any{"path": "big", "line": next})
		if len(r.text) > 4096 {
			t.Fatalf("reply of %d bytes", len(r.text))
		}
		c := content(t, r)
		if r.num("first_line") != next || r.num("offset") != int64(len(got)) || r.doc["text_truncated"] != nil {
			t.Fatalf("line %d: %.300s", next, r.text)
		}
		if n := r.num("line_count"); n < 1 || !bytes.Equal(c, bytes.Join(lines[next-1:next-1+n], nil)) {
			t.Fatalf("line %d: %d lines that are not the file's", next, n)
		}
		if r.str("encoding") == "utf8" && !utf8.Valid(c) {
			t.Fatal("utf8 content that is not UTF-8")
		}
		got = append(got, c...)
		if r.doc["next_line"] == nil {
			if r.doc["eof"] != true {
				t.Fatalf("no next_line before the end: %.300s", r.text)
			}
			break
		}
		if r.doc["truncated"] != true || r.num("next_offset") != int64(len(got)) {
			t.Fatalf("a page with more to come: %.300s", r.text)
		}
		next = r.num("next_line")
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("walk by next_line returned %d bytes, the file has %d", len(got), len(body))
	}
	t.Logf("30000 lines in %d pages", calls)
	for _, k := range []int{1, 2, 777, 29999, 30000} {
		r := s.wantOK("fs_read", map[string]any{"path": "big", "line": -k, "lines": 1})
		if c := content(t, r); !bytes.Equal(c, lines[len(lines)-k]) || r.num("first_line") != int64(len(lines)-k+1) {
			t.Errorf("line %d = %.300s", -k, r.text)
		}
	}
	r := s.wantOK("fs_read", map[string]any{"path": "big", "line": 12345, "lines": 3})
	if !bytes.Equal(content(t, r), bytes.Join(lines[12344:12347], nil)) || r.num("next_line") != 12348 {
		t.Errorf("line 12345 = %.300s", r.text)
	}
}

// TestReadLinesLongLine: a line longer than the reply is cut on a
// character boundary, says so, and continues by next_offset.
func TestReadLinesLongLine(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("\u4e16", 3000) + "\n" // 9001 bytes
	body := "short\n" + long + "tail\n"
	writeFile(t, filepath.Join(root, "f"), []byte(body), 0o644)
	s := start(t, root, "--max-response-bytes", "4096")
	r := s.wantOK("fs_read", map[string]any{"path": "f", "line": 2})
	c := content(t, r)
	if r.str("encoding") != "utf8" || !utf8.Valid(c) || !strings.HasPrefix(long, string(c)) || len(c) == 0 || len(c) >= len(long) ||
		r.doc["text_truncated"] != true || r.num("line_length") != int64(len(long)) || r.num("line_count") != 1 ||
		r.num("next_line") != 3 || r.num("next_offset") != 6+int64(len(c)) || r.doc["truncated"] != true {
		t.Fatalf("long line = %.400s", r.text)
	}
	line := string(c)
	for off := r.num("next_offset"); len(line) < len(long); {
		rest := s.wantOK("fs_read", map[string]any{"path": "f", "offset": off, "length": len(long) - len(line)})
		line += string(content(t, rest))
		off = rest.num("next_offset")
	}
	if line != long {
		t.Errorf("the rest of the line by next_offset is not the line")
	}
	if r := s.wantOK("fs_read", map[string]any{"path": "f", "line": 3}); string(content(t, r)) != "tail\n" {
		t.Errorf("line 3 = %s", r.text)
	}
	// A long last line without newline: nothing follows it.
	writeFile(t, filepath.Join(root, "g"), []byte("a\n"+strings.Repeat("z", 9000)), 0o644)
	r = s.wantOK("fs_read", map[string]any{"path": "g", "line": -1})
	if r.doc["text_truncated"] != true || r.num("line_length") != 9000 || r.doc["next_line"] != nil || r.num("first_line") != 2 {
		t.Errorf("long last line = %.400s", r.text)
	}
}

func TestReadIfSHA256(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "f")
	v1 := []byte(strings.Repeat("version one\n", 1000))
	writeFile(t, p, v1, 0o644)
	s := start(t, root, "--max-response-bytes", "4096")
	r := s.wantOK("fs_read", map[string]any{"path": "f"})
	if r.str("sha256") != sha(v1) || r.doc["truncated"] != true {
		t.Fatalf("first page = %.300s", r.text)
	}
	if r := s.wantOK("fs_read", map[string]any{"path": "f", "offset": r.num("next_offset"), "if_sha256": sha(v1)}); r.str("sha256") != sha(v1) {
		t.Fatalf("second page = %.300s", r.text)
	}
	v2 := []byte(strings.Repeat("version two\n", 1000))
	writeFile(t, p, v2, 0o644)
	e := s.wantErr("fs_read", map[string]any{"path": "f", "offset": 4000, "if_sha256": sha(v1)}, "precondition_failed")
	if cur, _ := e.doc["error"].(map[string]any)["current_sha256"].(string); cur != sha(v2) {
		t.Errorf("precondition_failed = %s, want current_sha256 %s", e.text, sha(v2))
	}
	s.wantErr("fs_read", map[string]any{"path": "f", "line": 3, "if_sha256": sha(v1)}, "precondition_failed")

	// Under a writer replacing the file as fast as it can, every reply
	// is one version's bytes with that version's sum, and every refusal
	// names a version.
	versions := map[string][]byte{sha(v1): v1, sha(v2): v2}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := v1
			if i%2 == 1 {
				v = v2
			}
			tmp := filepath.Join(root, fmt.Sprintf(".w%d", i%2))
			if err := os.WriteFile(tmp, v, 0o644); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	var oks, refusals int
	for time.Now().Before(deadline) {
		for _, want := range []string{sha(v1), sha(v2)} {
			r := s.call("fs_read", map[string]any{"path": "f", "offset": 3000, "if_sha256": want})
			if r.isError {
				if r.code() != "precondition_failed" {
					t.Fatalf("under writes: %s", r.text)
				}
				cur, _ := r.doc["error"].(map[string]any)["current_sha256"].(string)
				if _, ok := versions[cur]; !ok && cur != "" {
					t.Fatalf("current_sha256 %q is no version", cur)
				}
				refusals++
				continue
			}
			oks++
			v := versions[r.str("sha256")]
			if r.str("sha256") != want || !bytes.Equal(content(t, r), v[3000:3000+len(content(t, r))]) {
				t.Fatalf("reply mixes versions: sha256 %s, asked %s", r.str("sha256"), want)
			}
		}
	}
	halt()
	t.Logf("under writes: %d replies, %d refusals", oks, refusals)
	if oks == 0 || refusals == 0 {
		t.Errorf("under writes: %d replies, %d refusals; want both", oks, refusals)
	}
}

// TestReadSHA256Omitted: a file too large to hash within the call has no
// sum unless the read asks to compare one.
func TestReadSHA256Omitted(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "big")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 17 << 20
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantOK("fs_read", map[string]any{"path": "big", "length": 10})
	if r.doc["sha256_omitted"] != true || r.doc["sha256"] != nil {
		t.Errorf("17 MiB read = %.300s", r.text)
	}
	e := s.wantErr("fs_read", map[string]any{"path": "big", "length": 10, "if_sha256": strings.Repeat("0", 64)}, "precondition_failed")
	if cur, _ := e.doc["error"].(map[string]any)["current_sha256"].(string); cur != sha(make([]byte, size)) {
		t.Errorf("precondition_failed = %s", e.text)
	}
}
