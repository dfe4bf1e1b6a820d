package fronttest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TempPrefix starts the name of every temp file the worker writes.
const TempPrefix = ".fsmcp-tmp-"

// Tree builds a root and an outside directory beside it:
//
//	outside/secret.txt          must never be read
//	root/a.txt, root/sub/b.txt  ordinary files
//	root/link_in -> a.txt       relative, inside
//	root/link_out -> ../outside/secret.txt
//	root/abs_in -> <root>/a.txt (absolute, even though inside)
//	root/dirlink_out -> ../outside
//	root/dangling -> missing
//	root/sub/up -> ../a.txt
//	root/fifo
func Tree(t testing.TB) (root, outside string) {
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

// EditRoot is a fresh root holding the named files.
func EditRoot(t testing.TB, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		WriteFile(t, p, []byte(content), 0o644)
	}
	return root
}

// SHA is the lowercase hex sha256 of b, as the tools write it.
func SHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Reply is one tool call's outcome as the client sees it.
type Reply struct {
	Doc     map[string]any
	Text    string
	IsError bool
	Meta    mcp.Meta
}

// Code is the error's code, "" for a success.
func (r Reply) Code() string {
	e, _ := r.Doc["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// Str is the document's string at key, "" if none.
func (r Reply) Str(key string) string {
	s, _ := r.Doc[key].(string)
	return s
}

// Num is the document's number at key, 0 if none.
func (r Reply) Num(key string) int64 {
	f, _ := r.Doc[key].(float64)
	return int64(f)
}

// Content is the bytes a read reply's content holds, in its encoding.
func Content(t testing.TB, r Reply) []byte {
	t.Helper()
	switch r.Str("encoding") {
	case "utf8":
		return []byte(r.Str("content"))
	case "base64":
		b, err := base64.StdEncoding.DecodeString(r.Str("content"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("encoding %q", r.Str("encoding"))
	return nil
}

// FileLines splits b into lines as rg counts them.
func FileLines(b []byte) [][]byte {
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

// Check reads a tool's result and checks its shape: one text block with
// one JSON document whose ok agrees with isError, an error with a code,
// and scope_violation exactly on outside_root.
func Check(t testing.TB, name string, res *mcp.CallToolResult) Reply {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks, want 1", name, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T, want text", name, res.Content[0])
	}
	r := Reply{Text: tc.Text, IsError: res.IsError, Meta: res.Meta}
	if err := json.Unmarshal([]byte(tc.Text), &r.Doc); err != nil {
		t.Fatalf("%s: reply is not one JSON document: %v\n%s", name, err, tc.Text)
	}
	if ok, _ := r.Doc["ok"].(bool); ok == res.IsError {
		t.Fatalf("%s: ok=%v but isError=%v: %s", name, ok, res.IsError, tc.Text)
	}
	if res.IsError {
		if r.Code() == "" {
			t.Fatalf("%s: error reply without code: %s", name, tc.Text)
		}
		sv, _ := res.Meta["scope_violation"].(bool)
		if sv != (r.Code() == "outside_root") {
			t.Fatalf("%s: scope_violation=%v for code %s", name, sv, r.Code())
		}
	}
	return r
}

// NoHostPath fails if text names the host location of dir.
func NoHostPath(t testing.TB, text, dir string) {
	t.Helper()
	if strings.Contains(text, dir) {
		t.Fatalf("reply names a host path (%s): %s", dir, text)
	}
}

// ReadFile returns p's content.
func ReadFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteFile writes b to p with exactly mode, whatever the umask.
func WriteFile(t testing.TB, p string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// NoTempFiles fails if a temp file of the worker is left anywhere under
// dir, as the disk (not fs_list, which hides them) shows it.
func NoTempFiles(t testing.TB, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), TempPrefix) {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}

// Snapshot hashes every file under dir and records every symlink and
// directory, so a test can show a tree was not touched.
func Snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "link:" + target
		case d.IsDir():
			m[rel] = fmt.Sprintf("dir:%o", info.Mode().Perm())
		case d.Type().IsRegular():
			m[rel] = fmt.Sprintf("file:%o:%s", info.Mode().Perm(), SHA(ReadFile(t, p)))
		default:
			m[rel] = "other:" + info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// SameSnapshot fails unless two snapshots of what are the same.
func SameSnapshot(t testing.TB, what string, before, after map[string]string) {
	t.Helper()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("%s changed:\nbefore %v\nafter  %v", what, before, after)
	}
}

// SyncBuffer is a bytes.Buffer that a process's stderr copier, a log
// and the test may share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
