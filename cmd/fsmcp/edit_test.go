package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// untouched records a file's inode, mtime and ctime, so a test can show a
// call did not write it, rename over it or change its metadata.
type untouched struct {
	ino          uint64
	mtime, ctime syscall.Timespec
	content      []byte
}

func stamp(t *testing.T, p string) untouched {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	u := untouched{ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		u.content = readFile(t, p)
	}
	return u
}

func (u untouched) check(t *testing.T, what, p string) {
	t.Helper()
	got := stamp(t, p)
	if got.ino != u.ino || got.mtime != u.mtime || got.ctime != u.ctime || !bytes.Equal(got.content, u.content) {
		t.Fatalf("%s touched %s: inode %d→%d mtime %v→%v ctime %v→%v", what, p, u.ino, got.ino, u.mtime, got.mtime, u.ctime, got.ctime)
	}
}

// patchApplies checks that the diff a dry run returned is one GNU patch
// applies to the old content to give the new.
func patchApplies(t *testing.T, diff string, old, want []byte) {
	t.Helper()
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed: the diff cannot be checked against it")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	writeFile(t, f, old, 0o644)
	cmd := exec.Command("patch", "--quiet", "--fuzz=0", "--no-backup-if-mismatch", "-u", f)
	cmd.Stdin = strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch refused the diff: %v\n%s\n%s", err, out, diff)
	}
	if got := readFile(t, f); !bytes.Equal(got, want) {
		t.Fatalf("patch gave %q, want %q\n%s", got, want, diff)
	}
}

func TestEditDryRunChangesNothing(t *testing.T) {
	old := "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"
	root := editRoot(t, map[string]string{"f.txt": old, "bin": "\xff\xfe\x00raw\n"})
	s := start(t, root)
	p := filepath.Join(root, "f.txt")
	before := stamp(t, p)
	dirBefore := stamp(t, root)

	nw := strings.Replace(old, "five", "FIVE", 1)
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"fs_write", map[string]any{"path": "f.txt", "content": nw, "if_sha256": sha([]byte(old)), "dry_run": true}, nw},
		{"fs_write", map[string]any{"path": "f.txt", "content": "nine\n", "append": true, "if_sha256": sha([]byte(old)), "dry_run": true}, old + "nine\n"},
		{"fs_replace", map[string]any{"path": "f.txt", "edits": []any{map[string]any{"old": "five", "new": "FIVE"}}, "if_sha256": sha([]byte(old)), "dry_run": true}, nw},
		{"fs_splice", map[string]any{"path": "f.txt", "offset": strings.Index(old, "five"), "delete": 4, "insert": "FIVE", "if_sha256": sha([]byte(old)), "dry_run": true}, nw},
	}
	for _, c := range cases {
		r := s.wantOK(c.tool, c.args)
		if r.doc["dry_run"] != true || r.str("sha256") != sha([]byte(c.want)) || r.num("size") != int64(len(c.want)) || r.doc["diff_truncated"] != false {
			t.Errorf("%s dry run = %s", c.tool, r.text)
		}
		patchApplies(t, r.str("diff"), []byte(old), []byte(c.want))
		if !strings.HasPrefix(r.str("diff"), "--- a/f.txt\n+++ b/f.txt\n@@ ") {
			t.Errorf("%s: diff labels: %q", c.tool, r.str("diff"))
		}
		before.check(t, c.tool+" dry run", p)
		dirBefore.check(t, c.tool+" dry run", root)
		noTempFiles(t, root)
	}
	// A dry run checks the precondition as the real call does.
	r := s.wantErr("fs_write", map[string]any{"path": "f.txt", "content": "x", "if_sha256": sha([]byte("other")), "dry_run": true}, "precondition_failed")
	if r.doc["error"].(map[string]any)["current_sha256"] != sha([]byte(old)) {
		t.Errorf("dry-run precondition_failed = %s", r.text)
	}
	s.wantErr("fs_splice", map[string]any{"path": "f.txt", "offset": 0, "if_sha256": nil, "dry_run": true}, "precondition_failed")
	s.wantErr("fs_replace", map[string]any{"path": "f.txt", "edits": []any{map[string]any{"old": "zzz", "new": "y"}}, "if_sha256": sha([]byte(old)), "dry_run": true}, "no_match")
	before.check(t, "refused dry runs", p)

	// A dry-run create diffs against /dev/null and creates nothing.
	r = s.wantOK("fs_write", map[string]any{"path": "new.txt", "content": "hello\n", "if_sha256": nil, "dry_run": true})
	if r.str("diff") != "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n" || r.doc["created"] != true {
		t.Errorf("dry-run create = %s", r.text)
	}
	if _, err := os.Lstat(filepath.Join(root, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("a dry run created the file: %v", err)
	}
	// Bytes that are not UTF-8 come back as diff_base64.
	bin := []byte("\xff\xfe\x00raw\n")
	r = s.wantOK("fs_write", map[string]any{"path": "bin", "content": base64.StdEncoding.EncodeToString([]byte("\xff\xfe\x00RAW\n")),
		"encoding": "base64", "if_sha256": sha(bin), "dry_run": true})
	d, err := base64.StdEncoding.DecodeString(r.str("diff_base64"))
	if err != nil || r.doc["diff"] != nil || !bytes.Contains(d, []byte("-\xff\xfe\x00raw\n+\xff\xfe\x00RAW\n")) {
		t.Errorf("binary dry run = %s (%q)", r.text, d)
	}
	dirBefore.check(t, "dry runs", root)
}

func TestEditDryRunDiffTruncated(t *testing.T) {
	var old, nw strings.Builder
	for i := range 20000 {
		old.WriteString("line " + strings.Repeat("x", i%50) + "\n")
		nw.WriteString("LINE " + strings.Repeat("x", i%50) + "\n")
	}
	root := editRoot(t, map[string]string{"big": old.String()})
	s := start(t, root, "--max-response-bytes", "65536")
	r := s.wantOK("fs_write", map[string]any{"path": "big", "content": nw.String(), "if_sha256": sha([]byte(old.String())), "dry_run": true})
	if r.doc["diff_truncated"] != true || len(r.text) > 65536 || !strings.HasSuffix(r.str("diff"), "\n") || len(r.str("diff")) < 30000 {
		t.Fatalf("truncated dry run: %d bytes, truncated=%v, diff ends %q", len(r.text), r.doc["diff_truncated"], r.str("diff")[len(r.str("diff"))-20:])
	}
	if r.str("sha256") != sha([]byte(nw.String())) {
		t.Errorf("sha256 of a truncated dry run = %s", r.str("sha256"))
	}
}

func TestEditAppend(t *testing.T) {
	root := editRoot(t, map[string]string{"log": "a\n"})
	s := start(t, root)
	p := filepath.Join(root, "log")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.wantOK("fs_write", map[string]any{"path": "log", "content": "b\n", "append": true, "if_sha256": sha([]byte("a\n"))})
	if r.str("sha256") != sha([]byte("a\nb\n")) || r.num("size") != 4 || r.doc["created"] != false {
		t.Errorf("append = %s", r.text)
	}
	if got := readFile(t, p); string(got) != "a\nb\n" {
		t.Fatalf("after append: %q", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("append changed the mode to %v", fi.Mode())
	}
	// The same call again (a client's retry) fails: the precondition names
	// the file before the first append.
	r = s.wantErr("fs_write", map[string]any{"path": "log", "content": "b\n", "append": true, "if_sha256": sha([]byte("a\n"))}, "precondition_failed")
	if r.doc["error"].(map[string]any)["current_sha256"] != sha([]byte("a\nb\n")) {
		t.Errorf("retried append = %s", r.text)
	}
	if got := readFile(t, p); string(got) != "a\nb\n" {
		t.Fatalf("a retried append wrote: %q", got)
	}
	// null creates the file.
	s.wantOK("fs_write", map[string]any{"path": "new", "content": "first\n", "append": true, "if_sha256": nil})
	s.wantErr("fs_write", map[string]any{"path": "new", "content": "first\n", "append": true, "if_sha256": nil}, "precondition_failed")
	if got := readFile(t, filepath.Join(root, "new")); string(got) != "first\n" {
		t.Fatalf("append-create: %q", got)
	}
	// A large file: the appended file is exact.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	writeFile(t, p, big, 0o640)
	s.wantOK("fs_write", map[string]any{"path": "log", "content": "tail", "append": true, "if_sha256": sha(big)})
	if got := readFile(t, p); !bytes.Equal(got, append(big, "tail"...)) {
		t.Fatalf("append to a large file: %d bytes", len(got))
	}
	noTempFiles(t, root)
}

func TestEditSplice(t *testing.T) {
	const old = "0123456789"
	for _, c := range []struct {
		name   string
		offset int
		delete int
		insert string
		want   string
	}{
		{"at 0", 0, 0, "ab", "ab0123456789"},
		{"at 0 deleting", 0, 3, "", "3456789"},
		{"middle", 4, 2, "XYZ", "0123XYZ6789"},
		{"middle same length", 4, 2, "XY", "0123XY6789"},
		{"end", 10, 0, "!", "0123456789!"},
		{"delete to end", 5, 5, "", "01234"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := editRoot(t, map[string]string{"f": old})
			s := start(t, root)
			r := s.wantOK("fs_splice", map[string]any{"path": "f", "offset": c.offset, "delete": c.delete, "insert": c.insert, "if_sha256": sha([]byte(old))})
			if r.str("sha256") != sha([]byte(c.want)) || r.num("size") != int64(len(c.want)) {
				t.Errorf("splice = %s", r.text)
			}
			if got := readFile(t, filepath.Join(root, "f")); string(got) != c.want {
				t.Errorf("file = %q, want %q", got, c.want)
			}
			noTempFiles(t, root)
		})
	}
	root := editRoot(t, map[string]string{"f": old})
	s := start(t, root)
	p := filepath.Join(root, "f")
	before := stamp(t, p)
	s.wantErr("fs_splice", map[string]any{"path": "f", "offset": 11, "if_sha256": sha([]byte(old))}, "invalid_argument")
	s.wantErr("fs_splice", map[string]any{"path": "f", "offset": 8, "delete": 3, "if_sha256": sha([]byte(old))}, "invalid_argument")
	s.wantErr("fs_splice", map[string]any{"path": "f", "offset": -1, "if_sha256": sha([]byte(old))}, "invalid_argument")
	s.wantErr("fs_splice", map[string]any{"path": "f", "offset": 0, "delete": -1, "if_sha256": sha([]byte(old))}, "invalid_argument")
	s.wantErr("fs_splice", map[string]any{"path": "f", "offset": 0, "insert": "x"}, "invalid_argument")
	s.wantErr("fs_splice", map[string]any{"path": "f", "offset": 0, "insert": "x", "if_sha256": sha([]byte("no"))}, "precondition_failed")
	s.wantErr("fs_splice", map[string]any{"path": "f", "offset": 0, "insert": "!!", "encoding": "base64", "if_sha256": sha([]byte(old))}, "invalid_argument")
	s.wantErr("fs_splice", map[string]any{"offset": 0, "if_sha256": sha([]byte(old))}, "invalid_argument")
	before.check(t, "refused splices", p)
	// base64 insert, and null creating a file.
	s.wantOK("fs_splice", map[string]any{"path": "f", "offset": 10, "insert": base64.StdEncoding.EncodeToString([]byte{0, 0xff}), "encoding": "base64", "if_sha256": sha([]byte(old))})
	if got := readFile(t, p); string(got) != old+"\x00\xff" {
		t.Errorf("base64 splice: %q", got)
	}
	s.wantOK("fs_splice", map[string]any{"path": "g", "offset": 0, "insert": "new", "if_sha256": nil})
	s.wantErr("fs_splice", map[string]any{"path": "h", "offset": 1, "insert": "new", "if_sha256": nil}, "invalid_argument")
	if got := readFile(t, filepath.Join(root, "g")); string(got) != "new" {
		t.Errorf("splice create: %q", got)
	}
	// A symlink is not spliced through.
	if err := os.Symlink("g", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	s.wantErr("fs_splice", map[string]any{"path": "link", "offset": 0, "insert": "x", "if_sha256": sha([]byte("new"))}, "not_regular")
}

// A dry-run splice of a large file diffs a window around the change, with
// the line numbers of the whole file.
func TestEditSpliceDryRunLineNumbers(t *testing.T) {
	var b strings.Builder
	for i := range 100000 {
		b.WriteString("line " + strings.Repeat("y", i%7) + "\n")
	}
	old := b.String()
	off := strings.Index(old, "line yyy\n") + 50000*7 // somewhere deep
	off = strings.LastIndex(old[:off], "\n") + 1
	root := editRoot(t, map[string]string{"f": old})
	s := start(t, root)
	r := s.wantOK("fs_splice", map[string]any{"path": "f", "offset": off, "delete": 4, "insert": "LINE", "if_sha256": sha([]byte(old)), "dry_run": true})
	want := old[:off] + "LINE" + old[off+4:]
	patchApplies(t, r.str("diff"), []byte(old), []byte(want))
	line := strings.Count(old[:off], "\n") + 1
	if hdr := fmt.Sprintf("\n@@ -%d,7 +%d,7 @@\n", line-3, line-3); !strings.Contains(r.str("diff"), hdr) {
		t.Errorf("diff lacks %q:\n%s", hdr, r.str("diff"))
	}
	if r.str("sha256") != sha([]byte(want)) {
		t.Errorf("sha256 = %s", r.str("sha256"))
	}
}

// nearestOf returns the nearest candidate of a no_match reply.
func nearestOf(t *testing.T, r reply) map[string]any {
	t.Helper()
	n, _ := r.doc["error"].(map[string]any)["nearest"].(map[string]any)
	if n == nil {
		t.Fatalf("no nearest in %s", r.text)
	}
	return n
}

func TestEditReplaceNoMatchHelp(t *testing.T) {
	old := "package main\r\n\r\nfunc main() {\r\n\tprintln(\"Hello\")\r\n\treturn\r\n}\r\n"
	root := editRoot(t, map[string]string{"m.go": old})
	s := start(t, root)
	p := filepath.Join(root, "m.go")
	before := stamp(t, p)
	line4 := int64(strings.Index(old, "\tprintln"))
	for _, c := range []struct {
		old, differs string
		line, offset int64
	}{
		{"func main() {\n\tprintln(\"Hello\")\n", "line_endings", 3, int64(strings.Index(old, "func"))},
		{"    println(\"Hello\")", "whitespace", 4, line4},
		{"\tPRINTLN(\"hello\")", "case", 4, line4},
		{"  PRINTLN(\"hello\")\r\n\treturn", "whitespace_and_case", 4, line4},
		{"\tprintln(\"Hello\")\r\n\treturn 42", "content", 4, line4},
	} {
		r := s.wantErr("fs_replace", map[string]any{"path": "m.go", "edits": []any{map[string]any{"old": c.old, "new": "X"}}, "if_sha256": sha([]byte(old))}, "no_match")
		n := nearestOf(t, r)
		if n["differs"] != c.differs || int64(n["line_number"].(float64)) != c.line || int64(n["offset"].(float64)) != c.offset {
			t.Errorf("old %q: nearest = %v, want %s at line %d offset %d", c.old, n, c.differs, c.line, c.offset)
		}
		if msg := r.doc["error"].(map[string]any)["message"].(string); !strings.Contains(msg, fmt.Sprintf("line %d", c.line)) {
			t.Errorf("message does not name the line: %s", msg)
		}
	}
	// Nothing like it: no nearest at all.
	r := s.wantErr("fs_replace", map[string]any{"path": "m.go", "edits": []any{map[string]any{"old": "zzzzzzzzzzzz", "new": "X"}}, "if_sha256": sha([]byte(old))}, "no_match")
	if _, ok := r.doc["error"].(map[string]any)["nearest"]; ok {
		t.Errorf("a nearest for text unlike anything: %s", r.text)
	}
	before.check(t, "no-match replies", p)
}
