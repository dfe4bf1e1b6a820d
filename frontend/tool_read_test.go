package frontend

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
