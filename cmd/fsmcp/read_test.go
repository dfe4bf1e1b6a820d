package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree builds a root and an outside directory beside it:
//
//	outside/secret.txt          must never be read
//	root/a.txt, root/sub/b.txt  ordinary files
//	root/link_in -> a.txt       relative, inside
//	root/link_out -> ../outside/secret.txt
//	root/abs_in -> <root>/a.txt (absolute, even though inside)
//	root/dirlink_out -> ../outside
//	root/dangling -> missing
//	root/fifo
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret.txt"), "outside secret\n")
	write(filepath.Join(root, "a.txt"), "hello\n")
	write(filepath.Join(root, "sub", "b.txt"), "bee\n")
	links := map[string]string{
		"link_in":     "a.txt",
		"link_out":    "../outside/secret.txt",
		"abs_in":      filepath.Join(root, "a.txt"),
		"dirlink_out": "../outside",
		"dangling":    "missing",
		"sub/up":      "../a.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestStat(t *testing.T) {
	root, outside := tree(t)
	s := start(t, root)

	r := s.wantOK("fs_stat", map[string]any{"path": "a.txt"})
	if r.str("type") != "file" || r.num("size") != 6 || r.str("sha256") != sha([]byte("hello\n")) ||
		r.str("mode") != "0644" || r.num("nlink") != 1 {
		t.Errorf("fs_stat(a.txt) = %s", r.text)
	}
	if _, err := time.Parse(time.RFC3339Nano, r.str("mtime")); err != nil {
		t.Errorf("mtime %q: %v", r.str("mtime"), err)
	}
	// A leading slash is stripped.
	if r := s.wantOK("fs_stat", map[string]any{"path": "/a.txt"}); r.str("sha256") != sha([]byte("hello\n")) {
		t.Errorf("fs_stat(/a.txt) = %s", r.text)
	}
	// lstat semantics: a symlink is reported as itself, never hashed.
	r = s.wantOK("fs_stat", map[string]any{"path": "link_in"})
	if r.str("type") != "symlink" || r.str("target") != "a.txt" || r.doc["sha256"] != nil {
		t.Errorf("fs_stat(link_in) = %s", r.text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "dangling"})
	if r.str("target") != "missing" || r.doc["target_escapes"] != nil {
		t.Errorf("fs_stat(dangling) = %s", r.text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "sub/up"})
	if r.str("target") != "../a.txt" {
		t.Errorf("fs_stat(sub/up) = %s", r.text)
	}
	for _, p := range []string{"link_out", "abs_in", "dirlink_out"} {
		r := s.wantOK("fs_stat", map[string]any{"path": p})
		if r.doc["target_escapes"] != true || r.doc["target"] != nil {
			t.Errorf("fs_stat(%s) = %s, want target_escapes and no target", p, r.text)
		}
		noHostPath(t, r.text, root)
		noHostPath(t, r.text, outside)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "fifo"})
	if r.str("type") != "fifo" || r.doc["sha256"] != nil {
		t.Errorf("fs_stat(fifo) = %s", r.text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path": "sub"})
	if r.str("type") != "directory" || r.doc["confinement"] != nil {
		t.Errorf("fs_stat(sub) = %s", r.text)
	}
	s.wantErr("fs_stat", map[string]any{"path": "nope"}, "not_found")
	s.wantErr("fs_stat", map[string]any{"path": "a.txt/x"}, "not_a_directory")
}

func TestStatRootConfinement(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, p := range []string{"", ".", "/", "sub/.."} {
		r := s.wantOK("fs_stat", map[string]any{"path": p})
		c, ok := r.doc["confinement"].(map[string]any)
		if !ok {
			t.Fatalf("fs_stat(%q) has no confinement: %s", p, r.text)
		}
		abi, _ := c["landlock_abi"].(float64)
		if abi < 1 || c["network_denied"] != (abi >= 4) || c["read_only_enforced"] != false ||
			!strings.HasPrefix(c["rg_version"].(string), "ripgrep ") {
			t.Errorf("fs_stat(%q).confinement = %v", p, c)
		}
		noHostPath(t, r.text, root)
	}
}

// Every way out of the root is refused with outside_root and a
// scope_violation, for every read tool.
func TestReadToolsRefuseEscapes(t *testing.T) {
	root, outside := tree(t)
	s := start(t, root)
	escapes := []string{
		"..", "../outside/secret.txt", "sub/../../outside/secret.txt",
		"link_out", "dirlink_out/secret.txt", "abs_in", "//" + strings.TrimPrefix(outside, "/") + "/secret.txt",
	}
	for _, p := range escapes {
		for _, tool := range []string{"fs_read", "fs_list"} {
			r := s.wantErr(tool, map[string]any{"path": p}, "outside_root")
			noHostPath(t, r.text, root)
			if !strings.Contains(p, outside[1:]) { // the client's own words may be echoed
				noHostPath(t, r.text, outside)
			}
			if strings.Contains(r.text, "outside secret") {
				t.Fatalf("%s(%q) leaked outside content", tool, p)
			}
		}
	}
	for _, p := range []string{"..", "../outside", "dirlink_out/secret.txt", "/" + strings.TrimPrefix(outside, "/")} {
		s.wantErr("fs_stat", map[string]any{"path": "/" + p}, "outside_root")
	}
}

func TestRead(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	r := s.wantOK("fs_read", map[string]any{"path": "link_in"})
	if r.str("content") != "hello\n" || r.str("encoding") != "utf8" || r.doc["eof"] != true || r.num("size") != 6 {
		t.Errorf("fs_read(link_in) = %s", r.text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "a.txt", "offset": 1, "length": 3})
	if r.str("content") != "ell" || r.doc["eof"] != false || r.num("next_offset") != 4 || r.num("length") != 3 {
		t.Errorf("fs_read(a.txt, 1, 3) = %s", r.text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "a.txt", "offset": 100})
	if r.num("length") != 0 || r.doc["eof"] != true {
		t.Errorf("fs_read past the end = %s", r.text)
	}
	s.wantErr("fs_read", map[string]any{"path": "sub"}, "is_a_directory")
	s.wantErr("fs_read", map[string]any{"path": "dangling"}, "not_found")
	s.wantErr("fs_read", map[string]any{"path": "a.txt", "offset": -1}, "invalid_argument")

	// A split rune is reported as base64, never repaired.
	if err := os.WriteFile(filepath.Join(root, "u.txt"), []byte("h\xc3\xa9!"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "u.txt", "length": 2})
	if r.str("encoding") != "base64" || r.str("content") != base64.StdEncoding.EncodeToString([]byte("h\xc3")) {
		t.Errorf("fs_read of a split rune = %s", r.text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "u.txt"})
	if r.str("encoding") != "utf8" || r.str("content") != "hé!" {
		t.Errorf("fs_read(u.txt) = %s", r.text)
	}
}

// A fifo is refused at once: never opened for reading, never blocking.
func TestReadFifoDoesNotBlock(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	done := make(chan reply, 1)
	go func() { done <- s.call("fs_read", map[string]any{"path": "fifo"}) }()
	select {
	case r := <-done:
		if r.code() != "not_regular" {
			t.Fatalf("fs_read(fifo) = %s, want not_regular", r.text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fs_read(fifo) blocked")
	}
	s.wantErr("fs_stat", map[string]any{"path": "fifo/x"}, "not_a_directory")
}

func TestListSortedWithTypes(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	r := s.wantOK("fs_list", map[string]any{"path": ""})
	entries := r.doc["entries"].([]any)
	var names []string
	types := map[string]string{}
	for _, e := range entries {
		m := e.(map[string]any)
		names = append(names, m["name"].(string))
		types[m["name"].(string)] = m["type"].(string)
		if _, ok := m["sha256"]; ok {
			t.Errorf("fs_list hashed %v", m)
		}
	}
	want := []string{"a.txt", "abs_in", "dangling", "dirlink_out", "fifo", "link_in", "link_out", "sub"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("fs_list names = %v, want %v", names, want)
	}
	if types["sub"] != "directory" || types["fifo"] != "fifo" || types["link_out"] != "symlink" || types["a.txt"] != "file" {
		t.Errorf("fs_list types = %v", types)
	}
	s.wantErr("fs_list", map[string]any{"path": "a.txt"}, "not_a_directory")
	s.wantErr("fs_list", map[string]any{"cursor": "!!"}, "invalid_argument")
	// A symlink to a directory inside the root lists that directory.
	if err := os.Symlink("sub", filepath.Join(root, "sublink")); err != nil {
		t.Fatal(err)
	}
	r = s.wantOK("fs_list", map[string]any{"path": "sublink"})
	if !strings.Contains(r.text, `"b.txt"`) {
		t.Errorf("fs_list(sublink) = %s", r.text)
	}
}

// Names that are not UTF-8 are listed as name_base64 and addressable with
// path_base64.
func TestNonUTF8Names(t *testing.T) {
	root, _ := tree(t)
	name := "bad\xff\xfename"
	if err := os.WriteFile(filepath.Join(root, name), []byte("raw"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantOK("fs_list", map[string]any{"path": ""})
	b64 := base64.StdEncoding.EncodeToString([]byte(name))
	found := false
	for _, e := range r.doc["entries"].([]any) {
		m := e.(map[string]any)
		if m["name_base64"] == b64 {
			found = true
			if _, ok := m["name"]; ok {
				t.Errorf("entry has both name and name_base64: %v", m)
			}
		}
	}
	if !found {
		t.Fatalf("fs_list does not list %q as name_base64: %s", name, r.text)
	}
	r = s.wantOK("fs_read", map[string]any{"path_base64": b64})
	if r.str("content") != "raw" {
		t.Errorf("fs_read(path_base64) = %s", r.text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path_base64": b64})
	if r.str("path_base64") != b64 {
		t.Errorf("fs_stat(path_base64) = %s", r.text)
	}
	s.wantErr("fs_stat", map[string]any{"path_base64": "%%%"}, "invalid_argument")
	s.wantErr("fs_stat", map[string]any{"path": "a.txt", "path_base64": b64}, "invalid_argument")
}

// fs_read continuation walks a file larger than one reply, losslessly.
func TestReadContinuationWholeFile(t *testing.T) {
	root, _ := tree(t)
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
		if len(r.text) > max {
			t.Fatalf("reply of %d bytes exceeds --max-response-bytes %d", len(r.text), max)
		}
		chunk := []byte(r.str("content"))
		if r.str("encoding") == "base64" {
			var err error
			if chunk, err = base64.StdEncoding.DecodeString(r.str("content")); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, chunk...)
		if r.doc["eof"] == true {
			break
		}
		if r.doc["truncated"] != true || r.num("next_offset") != offset+int64(len(chunk)) {
			t.Fatalf("page at %d: %s", offset, r.text[:200])
		}
		offset = r.num("next_offset")
	}
	if !bytes.Equal(got, content.Bytes()) {
		t.Fatalf("read back %d bytes, want %d identical", len(got), content.Len())
	}
}

// fs_list cursors walk a 5,000-entry directory losslessly.
func TestListContinuation(t *testing.T) {
	root, _ := tree(t)
	dir := filepath.Join(root, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{}
	for i := range 5000 {
		name := fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", i%40))
		want = append(want, name)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(want)
	const max = 8192
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	var got []string
	args := map[string]any{"path": "many"}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("too many pages")
		}
		r := s.wantOK("fs_list", args)
		if len(r.text) > max {
			t.Fatalf("reply of %d bytes exceeds %d", len(r.text), max)
		}
		for _, e := range r.doc["entries"].([]any) {
			got = append(got, e.(map[string]any)["name"].(string))
		}
		if r.doc["truncated"] != true {
			break
		}
		args = map[string]any{"path": "many", "cursor": r.str("cursor")}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed %d names, want %d, in order", len(got), len(want))
	}
}
