package frontend

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

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

func TestRead(t *testing.T) {
	root, _ := fronttest.Tree(t)
	s := start(t, root)
	r := s.wantOK("fs_read", map[string]any{"path": "link_in"})
	if r.Str("content") != "hello\n" || r.Str("encoding") != "utf8" || r.Doc["eof"] != true || r.Num("size") != 6 {
		t.Errorf("fs_read(link_in) = %s", r.Text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "a.txt", "offset": 1, "length": 3})
	if r.Str("content") != "ell" || r.Doc["eof"] != false || r.Num("next_offset") != 4 || r.Num("length") != 3 {
		t.Errorf("fs_read(a.txt, 1, 3) = %s", r.Text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "a.txt", "offset": 100})
	if r.Num("length") != 0 || r.Doc["eof"] != true {
		t.Errorf("fs_read past the end = %s", r.Text)
	}
	s.wantErr("fs_read", map[string]any{"path": "sub"}, "is_a_directory")
	s.wantErr("fs_read", map[string]any{"path": "dangling"}, "not_found")
	s.wantErr("fs_read", map[string]any{"path": "a.txt", "offset": -1}, "invalid_argument")

	// A split rune is reported as base64, never repaired.
	if err := os.WriteFile(filepath.Join(root, "u.txt"), []byte("h\xc3\xa9!"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "u.txt", "length": 2})
	if r.Str("encoding") != "base64" || r.Str("content") != base64.StdEncoding.EncodeToString([]byte("h\xc3")) {
		t.Errorf("fs_read of a split rune = %s", r.Text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "u.txt"})
	if r.Str("encoding") != "utf8" || r.Str("content") != "hé!" {
		t.Errorf("fs_read(u.txt) = %s", r.Text)
	}
}

// A fifo is refused at once: never opened for reading, never blocking.
func TestReadFifoDoesNotBlock(t *testing.T) {
	root, _ := fronttest.Tree(t)
	s := start(t, root)
	done := make(chan fronttest.Reply, 1)
	go func() { done <- s.call("fs_read", map[string]any{"path": "fifo"}) }()
	select {
	case r := <-done:
		if r.Code() != "not_regular" {
			t.Fatalf("fs_read(fifo) = %s, want not_regular", r.Text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fs_read(fifo) blocked")
	}
	s.wantErr("fs_stat", map[string]any{"path": "fifo/x"}, "not_a_directory")
}

// fs_read continuation walks a file larger than one reply, losslessly.
func TestReadContinuationWholeFile(t *testing.T) {
	root, _ := fronttest.Tree(t)
	var content bytes.Buffer
	for i := 0; content.Len() < 300_000; i++ {
		fmt.Fprintf(&content, "line %d \"quoted\" \\ tab\t é\n", i)
	}
	content.WriteString("\xff tail")
	if err := os.WriteFile(filepath.Join(root, "big"), content.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	const max = 16384
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	var got []byte
	offset := int64(0)
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("too many pages")
		}
		r := s.wantOK("fs_read", map[string]any{"path": "big", "offset": offset})
		if len(r.Text) > max {
			t.Fatalf("reply of %d bytes exceeds --max-response-bytes %d", len(r.Text), max)
		}
		chunk := []byte(r.Str("content"))
		if r.Str("encoding") == "base64" {
			var err error
			if chunk, err = base64.StdEncoding.DecodeString(r.Str("content")); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, chunk...)
		if r.Doc["eof"] == true {
			break
		}
		if r.Doc["truncated"] != true || r.Num("next_offset") != offset+int64(len(chunk)) {
			t.Fatalf("page at %d: %s", offset, r.Text[:200])
		}
		offset = r.Num("next_offset")
	}
	if !bytes.Equal(got, content.Bytes()) {
		t.Fatalf("read back %d bytes, want %d identical", len(got), content.Len())
	}
}

// Every way out of the root is refused with outside_root and a
// scope_violation, for every read tool.
func TestReadToolsRefuseEscapes(t *testing.T) {
	root, outside := fronttest.Tree(t)
	s := start(t, root)
	escapes := []string{
		"..", "../outside/secret.txt", "sub/../../outside/secret.txt",
		"link_out", "dirlink_out/secret.txt", "abs_in", "//" + strings.TrimPrefix(outside, "/") + "/secret.txt",
	}
	for _, p := range escapes {
		for _, tool := range []string{"fs_read", "fs_list"} {
			r := s.wantErr(tool, map[string]any{"path": p}, "outside_root")
			fronttest.NoHostPath(t, r.Text, root)
			if !strings.Contains(p, outside[1:]) { // the client's own words may be echoed
				fronttest.NoHostPath(t, r.Text, outside)
			}
			if strings.Contains(r.Text, "outside secret") {
				t.Fatalf("%s(%q) leaked outside content", tool, p)
			}
		}
	}
	for _, p := range []string{"..", "../outside", "dirlink_out/secret.txt", "/" + strings.TrimPrefix(outside, "/")} {
		s.wantErr("fs_stat", map[string]any{"path": "/" + p}, "outside_root")
	}
}

func TestReadLinesFields(t *testing.T) {
	root := t.TempDir()
	body := "one\ntwo\r\nthree\nfour"
	fronttest.WriteFile(t, filepath.Join(root, "f"), []byte(body), 0o644)
	s := start(t, root)

	r := s.wantOK("fs_read", map[string]any{"path": "f", "line": 2, "lines": 2})
	if string(fronttest.Content(t, r)) != "two\r\nthree\n" || r.Num("offset") != 4 || r.Num("length") != 11 || r.Num("size") != int64(len(body)) ||
		r.Num("first_line") != 2 || r.Num("line_count") != 2 || r.Num("next_line") != 4 || r.Num("next_offset") != 15 ||
		r.Doc["eof"] != false || r.Doc["truncated"] != nil || r.Str("sha256") != fronttest.SHA([]byte(body)) {
		t.Errorf("line 2, lines 2 = %s", r.Text)
	}
	// The last line has no newline and still counts; nothing follows it.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": -1})
	if string(fronttest.Content(t, r)) != "four" || r.Num("first_line") != 4 || r.Num("line_count") != 1 || r.Doc["next_line"] != nil ||
		r.Doc["eof"] != true || r.Doc["next_offset"] != nil {
		t.Errorf("line -1 = %s", r.Text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": -3, "lines": 1})
	if string(fronttest.Content(t, r)) != "two\r\n" || r.Num("first_line") != 2 || r.Num("next_line") != 3 || r.Doc["truncated"] != nil {
		t.Errorf("line -3 = %s", r.Text)
	}
	// Without lines: as many as fit, here all of them.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": 1})
	if string(fronttest.Content(t, r)) != body || r.Num("line_count") != 4 || r.Doc["eof"] != true {
		t.Errorf("line 1 = %s", r.Text)
	}
	// A tail longer than the file starts at line 1.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": -100})
	if string(fronttest.Content(t, r)) != body || r.Num("first_line") != 1 {
		t.Errorf("line -100 = %s", r.Text)
	}
	// Past the end: nothing, at the end.
	r = s.wantOK("fs_read", map[string]any{"path": "f", "line": 9})
	if len(fronttest.Content(t, r)) != 0 || r.Num("first_line") != 9 || r.Num("line_count") != 0 || r.Num("offset") != int64(len(body)) ||
		r.Doc["eof"] != true || r.Doc["next_line"] != nil {
		t.Errorf("line 9 = %s", r.Text)
	}
	// Byte reads carry the version too.
	if r := s.wantOK("fs_read", map[string]any{"path": "f", "offset": 4}); r.Str("sha256") != fronttest.SHA([]byte(body)) || r.Doc["first_line"] != nil {
		t.Errorf("offset 4 = %s", r.Text)
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
	fronttest.WriteFile(t, filepath.Join(root, "big"), body, 0o644)
	lines := fronttest.FileLines(body)
	s := start(t, root, "--max-response-bytes", "4096")

	var got []byte
	next, calls := int64(1), 0
	for {
		calls++
		r := s.wantOK("fs_read", map[string]any{"path": "big", "line": next})
		if len(r.Text) > 4096 {
			t.Fatalf("reply of %d bytes", len(r.Text))
		}
		c := fronttest.Content(t, r)
		if r.Num("first_line") != next || r.Num("offset") != int64(len(got)) || r.Doc["text_truncated"] != nil {
			t.Fatalf("line %d: %.300s", next, r.Text)
		}
		if n := r.Num("line_count"); n < 1 || !bytes.Equal(c, bytes.Join(lines[next-1:next-1+n], nil)) {
			t.Fatalf("line %d: %d lines that are not the file's", next, n)
		}
		if r.Str("encoding") == "utf8" && !utf8.Valid(c) {
			t.Fatal("utf8 content that is not UTF-8")
		}
		got = append(got, c...)
		if r.Doc["next_line"] == nil {
			if r.Doc["eof"] != true {
				t.Fatalf("no next_line before the end: %.300s", r.Text)
			}
			break
		}
		if r.Doc["truncated"] != true || r.Num("next_offset") != int64(len(got)) {
			t.Fatalf("a page with more to come: %.300s", r.Text)
		}
		next = r.Num("next_line")
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("walk by next_line returned %d bytes, the file has %d", len(got), len(body))
	}
	t.Logf("30000 lines in %d pages", calls)
	for _, k := range []int{1, 2, 777, 29999, 30000} {
		r := s.wantOK("fs_read", map[string]any{"path": "big", "line": -k, "lines": 1})
		if c := fronttest.Content(t, r); !bytes.Equal(c, lines[len(lines)-k]) || r.Num("first_line") != int64(len(lines)-k+1) {
			t.Errorf("line %d = %.300s", -k, r.Text)
		}
	}
	r := s.wantOK("fs_read", map[string]any{"path": "big", "line": 12345, "lines": 3})
	if !bytes.Equal(fronttest.Content(t, r), bytes.Join(lines[12344:12347], nil)) || r.Num("next_line") != 12348 {
		t.Errorf("line 12345 = %.300s", r.Text)
	}
}

// TestReadLinesLongLine: a line longer than the reply is cut on a
// character boundary, says so, and continues by next_offset.
func TestReadLinesLongLine(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("\u4e16", 3000) + "\n" // 9001 bytes
	body := "short\n" + long + "tail\n"
	fronttest.WriteFile(t, filepath.Join(root, "f"), []byte(body), 0o644)
	s := start(t, root, "--max-response-bytes", "4096")
	r := s.wantOK("fs_read", map[string]any{"path": "f", "line": 2})
	c := fronttest.Content(t, r)
	if r.Str("encoding") != "utf8" || !utf8.Valid(c) || !strings.HasPrefix(long, string(c)) || len(c) == 0 || len(c) >= len(long) ||
		r.Doc["text_truncated"] != true || r.Num("line_length") != int64(len(long)) || r.Num("line_count") != 1 ||
		r.Num("next_line") != 3 || r.Num("next_offset") != 6+int64(len(c)) || r.Doc["truncated"] != true {
		t.Fatalf("long line = %.400s", r.Text)
	}
	line := string(c)
	for off := r.Num("next_offset"); len(line) < len(long); {
		rest := s.wantOK("fs_read", map[string]any{"path": "f", "offset": off, "length": len(long) - len(line)})
		line += string(fronttest.Content(t, rest))
		off = rest.Num("next_offset")
	}
	if line != long {
		t.Errorf("the rest of the line by next_offset is not the line")
	}
	if r := s.wantOK("fs_read", map[string]any{"path": "f", "line": 3}); string(fronttest.Content(t, r)) != "tail\n" {
		t.Errorf("line 3 = %s", r.Text)
	}
	// A long last line without newline: nothing follows it.
	fronttest.WriteFile(t, filepath.Join(root, "g"), []byte("a\n"+strings.Repeat("z", 9000)), 0o644)
	r = s.wantOK("fs_read", map[string]any{"path": "g", "line": -1})
	if r.Doc["text_truncated"] != true || r.Num("line_length") != 9000 || r.Doc["next_line"] != nil || r.Num("first_line") != 2 {
		t.Errorf("long last line = %.400s", r.Text)
	}
}

func TestReadIfSHA256(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "f")
	v1 := []byte(strings.Repeat("version one\n", 1000))
	fronttest.WriteFile(t, p, v1, 0o644)
	s := start(t, root, "--max-response-bytes", "4096")
	r := s.wantOK("fs_read", map[string]any{"path": "f"})
	if r.Str("sha256") != fronttest.SHA(v1) || r.Doc["truncated"] != true {
		t.Fatalf("first page = %.300s", r.Text)
	}
	if r := s.wantOK("fs_read", map[string]any{"path": "f", "offset": r.Num("next_offset"), "if_sha256": fronttest.SHA(v1)}); r.Str("sha256") != fronttest.SHA(v1) {
		t.Fatalf("second page = %.300s", r.Text)
	}
	v2 := []byte(strings.Repeat("version two\n", 1000))
	fronttest.WriteFile(t, p, v2, 0o644)
	e := s.wantErr("fs_read", map[string]any{"path": "f", "offset": 4000, "if_sha256": fronttest.SHA(v1)}, "precondition_failed")
	if cur, _ := e.Doc["error"].(map[string]any)["current_sha256"].(string); cur != fronttest.SHA(v2) {
		t.Errorf("precondition_failed = %s, want current_sha256 %s", e.Text, fronttest.SHA(v2))
	}
	s.wantErr("fs_read", map[string]any{"path": "f", "line": 3, "if_sha256": fronttest.SHA(v1)}, "precondition_failed")

	// Under a writer replacing the file as fast as it can, every reply
	// is one version's bytes with that version's sum, and every refusal
	// names a version.
	versions := map[string][]byte{fronttest.SHA(v1): v1, fronttest.SHA(v2): v2}
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
		for _, want := range []string{fronttest.SHA(v1), fronttest.SHA(v2)} {
			r := s.call("fs_read", map[string]any{"path": "f", "offset": 3000, "if_sha256": want})
			if r.IsError {
				if r.Code() != "precondition_failed" {
					t.Fatalf("under writes: %s", r.Text)
				}
				cur, _ := r.Doc["error"].(map[string]any)["current_sha256"].(string)
				if _, ok := versions[cur]; !ok && cur != "" {
					t.Fatalf("current_sha256 %q is no version", cur)
				}
				refusals++
				continue
			}
			oks++
			v := versions[r.Str("sha256")]
			if r.Str("sha256") != want || !bytes.Equal(fronttest.Content(t, r), v[3000:3000+len(fronttest.Content(t, r))]) {
				t.Fatalf("reply mixes versions: sha256 %s, asked %s", r.Str("sha256"), want)
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
	if r.Doc["sha256_omitted"] != true || r.Doc["sha256"] != nil {
		t.Errorf("17 MiB read = %.300s", r.Text)
	}
	e := s.wantErr("fs_read", map[string]any{"path": "big", "length": 10, "if_sha256": strings.Repeat("0", 64)}, "precondition_failed")
	if cur, _ := e.Doc["error"].(map[string]any)["current_sha256"].(string); cur != fronttest.SHA(make([]byte, size)) {
		t.Errorf("precondition_failed = %s", e.Text)
	}
}

// fs_read with charset: a UTF-16 file read by lines is refused (a 0x0a
// byte is not a line end there), by offset it decodes, and a name that
// is not one of the charsets is refused before anything is read.
func TestReadCharsetRefusals(t *testing.T) {
	root := t.TempDir()
	// "a\nb\n" in UTF-16LE.
	if err := os.WriteFile(filepath.Join(root, "w.txt"), []byte("a\x00\n\x00b\x00\n\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantErr("fs_read", map[string]any{"path": "w.txt", "charset": "utf-16le", "line": 1}, "invalid_argument")
	if !strings.Contains(r.Text, "by offset and length") {
		t.Errorf("line read of a UTF-16 file: %s", r.Text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "w.txt", "charset": "utf-16le"})
	if r.Str("content") != "a\nb\n" || r.Num("length") != 8 {
		t.Errorf("offset read of a UTF-16 file = %s", r.Text)
	}
	s.wantErr("fs_read", map[string]any{"path": "w.txt", "charset": "ebcdic"}, "invalid_argument")
}
