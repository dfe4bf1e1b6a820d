package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

func wsum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// newWriteService serves a fresh directory in-process, without Landlock, so
// that what these tests show holds for the worker's own code.
func newWriteService(t *testing.T) (*Service, string) {
	t.Helper()
	return newServiceIn(t, Options{})
}

func wput(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wcontent(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantWriteCode(t *testing.T, op string, err error, code fsmcpv1.ErrorCode) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, &Error{Code: code}) {
		t.Fatalf("%s = %v, want %v", op, err, code)
	}
	return e
}

func noTempLeft(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && isTempName(d.Name()) {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
}

// Another process replaces the file between the hash check and the
// commit: the exchange shows a different inode, is undone, and the other
// process's file survives.
func TestWriteDetectsReplacementBeforeCommit(t *testing.T) {
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "f")
	wput(t, p, "v1")
	s.beforeCommit = func(string) {
		wput(t, filepath.Join(dir, "other"), "external")
		if err := os.Rename(filepath.Join(dir, "other"), p); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("mine"), IfSha256: wsum([]byte("v1"))})
	e := wantWriteCode(t, "Write", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "external" {
		t.Fatalf("f = %q, want the external writer's content", got)
	}
	if e.CurrentSHA256 != wsum([]byte("external")) {
		t.Errorf("current sha256 %q, want the external file's", e.CurrentSHA256)
	}
	noTempLeft(t, dir)
}

// Another process writes the file in place between the hash check and the
// commit: same inode, but its size or mtime moved, so the exchange is
// undone.
func TestWriteDetectsInPlaceWriteBeforeCommit(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, p string)
	}{
		{"append", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(" more")
			f.Close()
		}},
		{"same size, new mtime", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("V2")
			f.Close()
			os.Chtimes(p, time.Now(), time.Now().Add(time.Hour))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newWriteService(t)
			p := filepath.Join(dir, "f")
			wput(t, p, "v1")
			s.beforeCommit = func(string) { c.change(t, p) }
			_, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("mine"), IfSha256: wsum([]byte("v1"))})
			wantWriteCode(t, "Write", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
			if got := wcontent(t, p); got == "mine" || got == "v1" {
				t.Fatalf("f = %q, want the external writer's content", got)
			}
			noTempLeft(t, dir)
		})
	}
}

// A file created by another process while a create was in flight is never
// clobbered.
func TestCreateDoesNotClobber(t *testing.T) {
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "f")
	s.beforeCommit = func(string) { wput(t, p, "theirs") }
	_, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("mine"), MustNotExist: true})
	e := wantWriteCode(t, "Write", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "theirs" || e.CurrentSHA256 != wsum([]byte("theirs")) {
		t.Fatalf("f = %q, error %v", got, e)
	}
	noTempLeft(t, dir)
}

// Many goroutines, one precondition: exactly one write wins, for Write and
// for Replace.
func TestConcurrentWritesOneWins(t *testing.T) {
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "f")
	wput(t, p, "start x")
	for round := range 10 {
		cur := wcontent(t, p)
		const n = 32
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					_, errs[i] = s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("f"),
						Content: []byte(fmt.Sprintf("round %d writer %d x", round, i)), IfSha256: wsum([]byte(cur))})
				} else {
					_, errs[i] = s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("./f"),
						Edits: []*fsmcpv1.Edit{{Old: []byte("x"), New: []byte(fmt.Sprintf("replaced %d x", i))}}, IfSha256: wsum([]byte(cur))})
				}
			}()
		}
		wg.Wait()
		wins := 0
		for i, err := range errs {
			if err == nil {
				wins++
				continue
			}
			wantWriteCode(t, fmt.Sprintf("writer %d", i), err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
		}
		if wins != 1 {
			t.Fatalf("round %d: %d writes won, want 1", round, wins)
		}
	}
	noTempLeft(t, dir)
	s.locks.mu.Lock()
	defer s.locks.mu.Unlock()
	if len(s.locks.m) != 0 {
		t.Errorf("%d path locks left after all writes ended", len(s.locks.m))
	}
}

// sweep removes only regular files with the temp prefix that predate the
// worker's start, and never looks through a symlink.
func TestSweep(t *testing.T) {
	s, dir := newWriteService(t)
	outside := filepath.Join(filepath.Dir(dir), "outside")
	wput(t, filepath.Join(outside, tempPrefix+"outside"), "must stay")
	wput(t, filepath.Join(dir, tempPrefix+"a"), "crash leftover")
	wput(t, filepath.Join(dir, "d/e", tempPrefix+"b"), "crash leftover")
	wput(t, filepath.Join(dir, "keep.txt"), "keep")
	wput(t, filepath.Join(dir, "d", "x"+tempPrefix), "not our prefix")
	// A copy a crash interrupted: a temp directory with a tree inside.
	wput(t, filepath.Join(dir, tempPrefix+"dir", "sub", "f"), "half a copy")
	os.Symlink("keep.txt", filepath.Join(dir, tempPrefix+"link"))
	os.Symlink(outside, filepath.Join(dir, "d", "out"))
	os.Symlink("../outside", filepath.Join(dir, "rel-out"))
	// A temp file of a write of this worker's own, begun after it started.
	started := time.Now()
	wput(t, filepath.Join(dir, tempPrefix+"in-flight"), "being written")
	future := started.Add(time.Second)
	os.Chtimes(filepath.Join(dir, tempPrefix+"in-flight"), future, future)
	// And a copy of its own in flight.
	wput(t, filepath.Join(dir, tempPrefix+"copying", "f"), "being copied")
	os.Chtimes(filepath.Join(dir, tempPrefix+"copying"), future, future)
	n, err := s.sweep(started, true)
	if err != nil || n != 3 {
		t.Fatalf("Sweep() = %d, %v; want 3, nil", n, err)
	}
	for _, gone := range []string{tempPrefix + "a", "d/e/" + tempPrefix + "b", tempPrefix + "dir"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s was not swept: %v", gone, err)
		}
	}
	for _, kept := range []string{"keep.txt", "d/x" + tempPrefix, tempPrefix + "link", tempPrefix + "in-flight", tempPrefix + "copying/f"} {
		if _, err := os.Lstat(filepath.Join(dir, kept)); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	if wcontent(t, filepath.Join(outside, tempPrefix+"outside")) != "must stay" {
		t.Error("the sweep reached outside the root")
	}
}

// Under the read-only Landlock ruleset the kernel refuses every write RPC,
// even when the worker's own code tries it. Landlock cannot be undone, so
// the confined part runs in a child process.
func TestReadOnlyLandlockRefusesWriteRPCs(t *testing.T) {
	if dir := os.Getenv("FSMCP_TEST_READONLY_CHILD"); dir != "" {
		readOnlyChild(t, dir)
		return
	}
	if sandbox.KernelABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	dir := filepath.Join(t.TempDir(), "root")
	wput(t, filepath.Join(dir, "f"), "old")
	wput(t, filepath.Join(dir, "d", "g"), "old")
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadOnlyLandlockRefusesWriteRPCs$", "-test.v")
	cmd.Env = append(os.Environ(), "FSMCP_TEST_READONLY_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if wcontent(t, filepath.Join(dir, "f")) != "old" || wcontent(t, filepath.Join(dir, "d", "g")) != "old" {
		t.Error("a file changed under the read-only ruleset")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("the root holds %d entries, want 3", len(entries))
	}
}

func readOnlyChild(t *testing.T, dir string) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fdPath := fmt.Sprintf("/proc/self/fd/%d", fd)
	root, err := os.OpenRoot(fdPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.ConfineWorker(fdPath, true, nil); err != nil {
		t.Fatal(err)
	}
	s, err := New(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	denied := fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED
	_, err = s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("new"), IfSha256: wsum([]byte("old"))})
	wantWriteCode(t, "Write(replace)", err, denied)
	_, err = s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("new"), Content: []byte("new"), MustNotExist: true})
	wantWriteCode(t, "Write(create)", err, denied)
	_, err = s.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: []byte("d/g"), IfSha256: wsum([]byte("old")),
		Edits: []*fsmcpv1.Edit{{Old: []byte("o"), New: []byte("n")}}})
	wantWriteCode(t, "Replace", err, denied)
	_, err = s.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: []byte("x/y")})
	wantWriteCode(t, "Mkdir", err, denied)
	_, err = s.Move(ctx, &fsmcpv1.MoveRequest{From: []byte("f"), To: []byte("d/f")})
	wantWriteCode(t, "Move", err, denied)
	_, err = s.Move(ctx, &fsmcpv1.MoveRequest{From: []byte("f"), To: []byte("f2")})
	wantWriteCode(t, "Move(same directory)", err, denied)
	for _, p := range []string{"f", "empty", "d"} {
		_, err = s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte(p), Recursive: true})
		wantWriteCode(t, "Delete("+p+")", err, denied)
	}
	// Even a write that bypasses the Root is refused by the kernel.
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("bypass"), 0o644); !errors.Is(err, unix.EACCES) {
		t.Errorf("direct write under the read-only ruleset = %v, want EACCES", err)
	}
}

// BenchmarkServiceWrite4K is a 4 KiB Write called in-process on the
// Service: every check and system call of the worker, without MCP, JSON or
// gRPC. Set beside cmd/fsmcp's BenchmarkWrite4K, it splits the server's
// cost between the worker and the hops.
func BenchmarkServiceWrite4K(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "root")
	os.Mkdir(dir, 0o755)
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	s, err := New(root, Options{})
	if err != nil {
		b.Fatal(err)
	}
	versions := [2][]byte{[]byte(strings.Repeat("a", 4096)), []byte(strings.Repeat("b", 4096))}
	if err := os.WriteFile(filepath.Join(dir, "f"), versions[0], 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("f"), Content: versions[i%2], IfSha256: wsum(versions[(i+1)%2])}); err != nil {
			b.Fatal(err)
		}
	}
}
