package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
	"github.com/fsmcp/fsmcp/worker/internal/textedit"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/status"
)

// newLimitedService is newWriteService with the given budgets.
func newLimitedService(t *testing.T, l admit.Limits) (*Service, string) {
	t.Helper()
	return newServiceIn(t, Options{Limits: l})
}

// searchService is a Service with a real rg over a fresh directory.
type searchService struct {
	*Service
	testDir string
}

func newSearchService(t *testing.T, l admit.Limits) searchService {
	t.Helper()
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("rg not installed (scripts/test.sh installs ripgrep)")
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devNull.Close() })
	s, dir := newServiceIn(t, Options{RG: rg, DevNull: devNull, Limits: l})
	return searchService{s, dir}
}

// Finding 3: a local writer changes bytes in place and restores the mtime
// to the nanosecond (cp -p, rsync -t), between the hash and the commit.
// Size, inode and mtime all match; only ctime shows the change, and the
// write must not replace it.
func TestRobustWriteDetectsRestoredMtime(t *testing.T) {
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "f")
	wput(t, p, "version one")
	s.beforeCommit = func(string) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("V"), 0)
		f.Close()
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.Stat(p); !after.ModTime().Equal(fi.ModTime()) || after.Size() != fi.Size() {
			t.Fatal("the mtime or size was not restored")
		}
	}
	_, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("mine"), IfSha256: wsum([]byte("version one"))})
	e := wantWriteCode(t, "Write", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "Version one" {
		t.Fatalf("f = %q, want the other writer's %q", got, "Version one")
	}
	if e.CurrentSHA256 != wsum([]byte("Version one")) {
		t.Errorf("current_sha256 = %s, want the other writer's", e.CurrentSHA256)
	}
	noTempLeft(t, dir)
}

// Finding 1: edits that multiply a file's size are refused from the match
// count, before anything is allocated: a 1-byte file edited a → b×10⁶, then
// b → c×10⁶ with all, would be 10¹² bytes. The largest result allowed is
// accepted and one byte more is refused.
func TestRobustReplaceExpansionRefusedBeforeAllocation(t *testing.T) {
	const maxFile = 1 << 20
	s, dir := newLimitedService(t, admit.Limits{MaxFileBytes: maxFile, MemoryBytes: 64 << 20})
	p := filepath.Join(dir, "f")
	wput(t, p, "a")
	big := func(c string, n int) []byte { return []byte(strings.Repeat(c, n)) }
	_, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum([]byte("a")),
		Edits: []*fsmcpv1.Edit{{Old: []byte("a"), New: big("b", 1_000_000)}, {Old: []byte("b"), New: big("c", 1_000_000), All: true}}})
	e := wantWriteCode(t, "Replace(a→b×10⁶, b→c×10⁶)", err, fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE)
	if !strings.Contains(e.Message, "edit 1") {
		t.Errorf("message %q does not name edit 1", e.Message)
	}
	if got := wcontent(t, p); got != "a" {
		t.Errorf("f = %q after a refused replace", got)
	}
	noTempLeft(t, dir)

	_, err = s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum([]byte("a")),
		Edits: []*fsmcpv1.Edit{{Old: []byte("a"), New: big("b", maxFile+1)}}})
	wantWriteCode(t, "Replace(a→b×(max+1))", err, fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE)
	resp, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum([]byte("a")),
		Edits: []*fsmcpv1.Edit{{Old: []byte("a"), New: big("b", maxFile)}}})
	if err != nil || resp.GetSize() != maxFile {
		t.Fatalf("Replace(a→b×max) = %v, %v; want %d bytes", resp, err, maxFile)
	}
	// A file over the bound is not read at all.
	_, err = s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: resp.GetSha256(),
		Edits: []*fsmcpv1.Edit{{Old: []byte("b"), New: []byte("bb")}}})
	wantWriteCode(t, "Replace(max-sized file, growing)", err, fsmcpv1.ErrorCode_ERROR_CODE_AMBIGUOUS_MATCH)
	_, err = s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("g"), MustNotExist: true, Content: big("x", maxFile+1)})
	wantWriteCode(t, "Write(max+1 bytes)", err, fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE)
	if _, err := os.Lstat(filepath.Join(dir, "g")); !os.IsNotExist(err) {
		t.Errorf("g exists after a refused write: %v", err)
	}
}

// CountMatches agrees with bytes.Count across its chunk boundaries.
func TestRobustCountMatchesChunks(t *testing.T) {
	data := []byte(strings.Repeat("ab", textedit.CtxEvery) + "aba")
	for _, old := range []string{"a", "ab", "ba", "bab", "aba", "b" + strings.Repeat("ab", 10)} {
		got, err := textedit.CountMatches(context.Background(), data, []byte(old))
		if want := int64(strings.Count(string(data), old)); err != nil || got != want {
			t.Errorf("textedit.CountMatches(%q) = %d, %v; want %d", old, got, err, want)
		}
	}
}

// Finding 2: 400 alternating all-edits of a 16 MiB file take seconds of
// CPU; the call's deadline stops them within milliseconds, and nothing is
// written. The bound asserted is ten times what is expected, so that a
// loaded machine does not fail it; the figure is logged.
func TestRobustReplaceStopsAtDeadline(t *testing.T) {
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "f")
	content := strings.Repeat("x", 16<<20)
	wput(t, p, content)
	var edits []*fsmcpv1.Edit
	for i := range 400 {
		from, to := "x", "y"
		if i%2 == 1 {
			from, to = to, from
		}
		edits = append(edits, &fsmcpv1.Edit{Old: []byte(from), New: []byte(to), All: true})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := s.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum([]byte(content)), Edits: edits})
	deadline, _ := ctx.Deadline()
	late := time.Since(deadline)
	wantWriteCode(t, "Replace(400 all-edits of 16 MiB)", err, fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT)
	t.Logf("replace returned %v after its deadline", late)
	if late > 2*time.Second {
		t.Errorf("replace returned %v after its deadline, want milliseconds", late)
	}
	if got := wcontent(t, p); got != content {
		t.Error("the file changed after a timed-out replace")
	}
	noTempLeft(t, dir)
}

// chattr sets inode flags on dir for the test and clears them after; it
// skips, saying why, where chattr or the filesystem's support is missing.
func chattr(t *testing.T, flag, dir string) {
	t.Helper()
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr not installed (scripts/test.sh installs e2fsprogs)")
	}
	if os.Getuid() != 0 {
		t.Skip("chattr +a and +i need CAP_LINUX_IMMUTABLE (run as root)")
	}
	if out, err := exec.Command("chattr", "+"+flag, dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +%s unsupported here: %v %s", flag, err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-"+flag, dir).Run() })
}

// Finding 4: in an append-only or immutable directory no entry can be
// renamed or removed. A write there is refused before a temp file is made,
// so no hidden copy of the content is left behind.
func TestRobustWriteInAppendOnlyDirLeavesNothing(t *testing.T) {
	for _, flag := range []string{"a", "i"} {
		t.Run("+"+flag, func(t *testing.T) {
			s, dir := newWriteService(t)
			sub := filepath.Join(dir, "d")
			wput(t, filepath.Join(sub, "f"), "old")
			chattr(t, flag, sub)
			_, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("d/f"), Content: []byte("new"), IfSha256: wsum([]byte("old"))})
			wantWriteCode(t, "Write(d/f)", err, fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
			_, err = s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("d/g"), Content: []byte("new"), MustNotExist: true})
			wantWriteCode(t, "Write(d/g)", err, fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
			if got := wcontent(t, filepath.Join(sub, "f")); got != "old" {
				t.Errorf("d/f = %q", got)
			}
			noTempLeft(t, dir)
		})
	}
}

// A directory made append-only while a write is in flight: the rename and
// the temp file's removal both fail with EPERM. The temp file's content is
// truncated away and the refusal names it, so nothing is left unreported.
func TestRobustWriteReportsTempItCannotRemove(t *testing.T) {
	s, dir := newWriteService(t)
	sub := filepath.Join(dir, "d")
	wput(t, filepath.Join(sub, "f"), "old")
	if _, err := exec.LookPath("chattr"); err != nil || os.Getuid() != 0 {
		t.Skip("needs chattr and root (scripts/test.sh installs e2fsprogs)")
	}
	s.beforeCommit = func(string) { chattr(t, "a", sub) }
	_, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("d/f"), Content: []byte("secret new content"), IfSha256: wsum([]byte("old"))})
	e := wantWriteCode(t, "Write(d/f)", err, fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	ents, _ := os.ReadDir(sub)
	var temps []string
	for _, ent := range ents {
		if isTempName(ent.Name()) {
			temps = append(temps, ent.Name())
			if fi, _ := ent.Info(); fi.Size() != 0 {
				t.Errorf("temp file %s keeps %d bytes", ent.Name(), fi.Size())
			}
		}
	}
	if len(temps) != 1 || !strings.Contains(e.Message, temps[0]) || !strings.Contains(e.Message, "could not be removed") {
		t.Errorf("message %q, temp files %q: want the one temp file named", e.Message, temps)
	}
	if got := wcontent(t, filepath.Join(sub, "f")); got != "old" {
		t.Errorf("d/f = %q", got)
	}
	exec.Command("chattr", "-a", sub).Run()
	if len(temps) == 1 {
		os.Remove(filepath.Join(sub, temps[0]))
	}
}

// deepPath is "d/d/…/d" with n components.
func deepPath(n int) string { return strings.TrimSuffix(strings.Repeat("d/", n), "/") }

// Finding 2: fs_mkdir of d/d/…/d walks each component once relative to
// the one before, and a path deeper than any recursive delete could
// remove is too_large with nothing made.
func TestRobustMkdirDeepPath(t *testing.T) {
	s, dir := newWriteService(t)
	resp, err := s.Mkdir(context.Background(), &fsmcpv1.MkdirRequest{Path: []byte(deepPath(maxWalkDepth))})
	if err != nil || !resp.GetCreated() {
		t.Fatalf("Mkdir(depth %d) = %v, %v", maxWalkDepth, resp, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, deepPath(maxWalkDepth))); err != nil || !fi.IsDir() || fi.Mode().Perm() != newDirMode {
		t.Fatalf("the deepest directory: %v, %v", fi, err)
	}
	_, err = s.Mkdir(context.Background(), &fsmcpv1.MkdirRequest{Path: []byte("e/" + deepPath(maxWalkDepth))})
	wantWriteCode(t, "Mkdir(depth max+1)", err, fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE)
	if _, err := os.Lstat(filepath.Join(dir, "e")); !os.IsNotExist(err) {
		t.Errorf("e exists after a refused mkdir: %v", err)
	}
	// The whole tree can be deleted again.
	del, err := s.Delete(context.Background(), &fsmcpv1.DeleteRequest{Path: []byte("d"), Recursive: true})
	if err != nil || del.GetRemoved() != maxWalkDepth {
		t.Fatalf("Delete(d) = %v, %v; want %d removed", del, err, maxWalkDepth)
	}
}

// The walk agrees with the Root on "..", on symlinks inside the root
// (followed, and ".." after one is the target's parent) and on leaving it.
func TestRobustMkdirDotDotAndSymlinks(t *testing.T) {
	s, dir := newWriteService(t)
	wput(t, filepath.Join(dir, "a", "b", "keep"), "")
	if err := os.Symlink("a/b", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, made string
	}{
		{"x/../y", "y"},
		{"link/c", "a/b/c"},
		{"link/../z", "a/z"},
		{"a/./b/../w/", "a/w"},
	} {
		resp, err := s.Mkdir(context.Background(), &fsmcpv1.MkdirRequest{Path: []byte(c.path)})
		if err != nil || !resp.GetCreated() {
			t.Errorf("Mkdir(%q) = %v, %v", c.path, resp, err)
		}
		if fi, err := os.Lstat(filepath.Join(dir, c.made)); err != nil || !fi.IsDir() {
			t.Errorf("Mkdir(%q): %s is %v, %v", c.path, c.made, fi, err)
		}
	}
	_, err := s.Mkdir(context.Background(), &fsmcpv1.MkdirRequest{Path: []byte("x/../../out")})
	wantWriteCode(t, "Mkdir(x/../../out)", err, fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT)
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "out")); !os.IsNotExist(err) {
		t.Errorf("out exists beside the root: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: []byte("q/r")})
	wantWriteCode(t, "Mkdir(cancelled)", err, fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED)
}

// Finding 4: a recursive delete of a tree deeper than the walk's limit is
// refused before anything is removed.
func TestRobustDeleteTooDeepRemovesNothing(t *testing.T) {
	s, dir := newWriteService(t)
	// Built with relative mkdirat steps: the tree is deeper than a host
	// path can name.
	deep := maxWalkDepth + 2
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < deep; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		if i == 0 || i == deep/2 {
			wfd, _ := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY, 0o644)
			unix.Close(wfd)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	_, err = s.Delete(context.Background(), &fsmcpv1.DeleteRequest{Path: []byte("d"), Recursive: true})
	e := wantWriteCode(t, "Delete(too deep)", err, fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE)
	if !strings.Contains(e.Message, "nothing was changed") {
		t.Errorf("message %q", e.Message)
	}
	if _, err := os.Lstat(filepath.Join(dir, "f")); err != nil {
		t.Errorf("f was removed: %v", err)
	}
	// Take it down from the middle, leaving depth within the limit.
	mid := deepPath(deep / 2)
	if err := os.RemoveAll(filepath.Join(dir, mid)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(context.Background(), &fsmcpv1.DeleteRequest{Path: []byte("d"), Recursive: true}); err != nil {
		t.Fatalf("Delete(d) within the limit: %v", err)
	}
}

// BenchmarkRobustMkdirDepth creates d/d/…/d at two depths: linear work
// gives a ratio near 2 between them.
func BenchmarkRobustMkdirDepth(b *testing.B) {
	for _, n := range []int{400, 800} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			root, err := os.OpenRoot(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			s, err := New(root, Options{})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				p := fmt.Sprintf("%d/%s", i, deepPath(n))
				if _, err := s.Mkdir(context.Background(), &fsmcpv1.MkdirRequest{Path: []byte(p)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Finding 9: out of descriptors is transient and retryable: unavailable
// with the reason, never internal, both for a file the worker opens and
// for the pipes of an rg it starts. It runs in a child process of its own:
// in this one, an earlier test's goroutine closing a connection late would
// free a descriptor below the limit and let the call through.
func TestRobustOutOfDescriptorsIsUnavailable(t *testing.T) {
	if os.Getenv("FSMCP_TEST_NOFILE_CHILD") != "" {
		outOfDescriptorsChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRobustOutOfDescriptorsIsUnavailable$", "-test.v")
	cmd.Env = append(os.Environ(), "FSMCP_TEST_NOFILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func outOfDescriptorsChild(t *testing.T) {
	s := newSearchService(t, admit.Limits{})
	wput(t, filepath.Join(s.testDir, "f"), "inside\n")
	c := serveInProcess(t, s.Service)
	// Connect first: the limit below leaves no descriptor to spare.
	if _, err := c.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte(".")}); err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// The lowest free descriptor number: with the limit there, no new
	// descriptor can be had.
	free, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(free)
	lim := old
	lim.Cur = uint64(free)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// Any hole below the limit that opens after all is filled right before
	// each call, and the fillers are closed once the limit is back.
	var fillers []int
	fill := func() {
		for {
			fd, err := unix.Dup(0)
			if err != nil {
				return
			}
			fillers = append(fillers, fd)
		}
	}
	fill()
	_, statErr := c.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte("f")})
	fill()
	stream, err := c.Grep(context.Background(), &fsmcpv1.GrepRequest{Pattern: "inside"})
	var grepErr error
	if err == nil {
		for {
			if _, grepErr = stream.Recv(); grepErr != nil {
				break
			}
		}
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	for _, fd := range fillers {
		unix.Close(fd)
	}
	for op, err := range map[string]error{"Stat(f)": statErr, "Grep(inside)": grepErr} {
		e := errorOf(err)
		if e == nil || e.Code != fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE || !strings.Contains(e.Message, "too many open files") {
			t.Errorf("%s with no descriptor free = %v, want unavailable: too many open files", op, err)
		}
	}
}

// errorOf is the fsmcp.v1.Error detail of a gRPC error, or nil.
func errorOf(err error) *fsmcpv1.Error {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if e, ok := d.(*fsmcpv1.Error); ok {
			return e
		}
	}
	return nil
}

// Heavy calls past --max-heavy wait their turn, at most --queue-timeout,
// then answer unavailable; a call whose own deadline comes first answers
// timeout; once a slot is free the same call succeeds.
func TestRobustHeavyCallsQueueBounded(t *testing.T) {
	s, dir := newLimitedService(t, admit.Limits{MaxHeavy: 1, QueueTimeout: 100 * time.Millisecond})
	wput(t, filepath.Join(dir, "f"), "v1")
	release, err := s.heavy(context.Background(), "test", "")
	if err != nil {
		t.Fatal(err)
	}
	write := func(ctx context.Context) error {
		_, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("v2"), IfSha256: wsum([]byte("v1"))})
		return err
	}
	began := time.Now()
	e := wantWriteCode(t, "Write while the slot is held", write(context.Background()), fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE)
	if waited := time.Since(began); waited < 100*time.Millisecond {
		t.Errorf("refused after %v, before the queue timeout", waited)
	}
	if !strings.Contains(e.Message, "busy") {
		t.Errorf("message %q does not say the worker is busy", e.Message)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	wantWriteCode(t, "Write with a shorter deadline", write(ctx), fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT)
	_, err = s.Mkdir(context.Background(), &fsmcpv1.MkdirRequest{Path: []byte("d")})
	wantWriteCode(t, "Mkdir while the slot is held", err, fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE)
	if got := wcontent(t, filepath.Join(dir, "f")); got != "v1" {
		t.Errorf("f = %q after refused writes", got)
	}
	release()
	if err := write(context.Background()); err != nil {
		t.Fatalf("Write with the slot free: %v", err)
	}
}

// The memory budget admits what fits and queues the rest: a reservation
// larger than the whole budget is too_large at once, one that does not fit
// now waits and then is unavailable.
func TestRobustMemoryBudget(t *testing.T) {
	s, _ := newLimitedService(t, admit.Limits{MemoryBytes: 64 << 20, QueueTimeout: 50 * time.Millisecond})
	capacity := int64(64<<20) - admit.MemoryReserve
	_, err := s.reserve(context.Background(), "test", "", capacity+1)
	wantWriteCode(t, "Reserve(capacity+1)", err, fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE)
	release, err := s.reserve(context.Background(), "test", "", capacity-10)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.reserve(context.Background(), "test", "", 11)
	wantWriteCode(t, "Reserve(11) of 10 free", err, fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE)
	more, err := s.reserve(context.Background(), "test", "", 10)
	if err != nil {
		t.Fatalf("Reserve(10) of 10 free: %v", err)
	}
	more()
	release()
	if r, err := s.reserve(context.Background(), "test", "", capacity); err != nil {
		t.Fatalf("Reserve(capacity) when free: %v", err)
	} else {
		r()
	}
}

// budgetService is a Service with a 64 MiB worker (a 32 MiB budget) that
// views files up to 20 MiB, served over a real gRPC connection, so that
// replies are encoded and sent as in fsmcp.
func budgetService(t *testing.T) (*Service, fsmcpv1.WorkerServiceClient, string) {
	t.Helper()
	s, dir := newServiceIn(t, Options{MaxMedia: 20 << 20, Limits: admit.Limits{MemoryBytes: 64 << 20, QueueTimeout: 200 * time.Millisecond}})
	return s, serveInProcess(t, s), dir
}

// budgetFree waits until the whole budget can be reserved again: the
// reservations of answered calls are released once their replies were
// sent, just after the client has them.
func budgetFree(t *testing.T, s *Service) {
	t.Helper()
	capacity := int64(64<<20) - admit.MemoryReserve
	deadline := time.Now().Add(30 * time.Second)
	for {
		release, err := s.reserve(context.Background(), "test", "", capacity)
		if err == nil {
			release()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the budget is still taken after the calls answered: %v", err)
		}
	}
}

// fs_view holds a file twice (as read, and encoded in its reply) and
// reserves both from the memory budget until the reply is sent: a file
// whose two copies exceed the budget is too_large unread; one that does
// not fit while others hold the budget waits, then is unavailable; with
// the budget free it is served, and its reservation is returned.
func TestRobustViewReservesMemory(t *testing.T) {
	s, c, dir := budgetService(t)
	capacity := int64(64<<20) - admit.MemoryReserve
	ctx := context.Background()
	wput(t, filepath.Join(dir, "big"), strings.Repeat("b", 17<<20))
	_, err := c.View(ctx, &fsmcpv1.ViewRequest{Path: []byte("big")})
	if e := errorOf(err); e.GetCode() != fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE || !strings.Contains(e.GetMessage(), "memory budget") {
		t.Fatalf("view of 17 MiB with a 32 MiB budget: %v, want too_large naming the memory budget", err)
	}

	const size = 4 << 20
	wput(t, filepath.Join(dir, "pic"), strings.Repeat("p", size))
	held, err := s.reserve(ctx, "test", "", capacity-size)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = c.View(ctx, &fsmcpv1.ViewRequest{Path: []byte("pic")})
	if e := errorOf(err); e.GetCode() != fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE || !strings.Contains(e.GetMessage(), "busy") {
		t.Fatalf("view of 4 MiB with 4 MiB of the budget free: %v, want unavailable (busy)", err)
	}
	if waited := time.Since(began); waited < 200*time.Millisecond {
		t.Errorf("refused after %v, before the queue timeout", waited)
	}
	held()
	resp, err := c.View(ctx, &fsmcpv1.ViewRequest{Path: []byte("pic")})
	if err != nil || len(resp.GetData()) != size {
		t.Fatalf("view with the budget free: %d bytes, %v", len(resp.GetData()), err)
	}
	budgetFree(t, s)
}

// Concurrent fs_view calls beyond the budget take turns: each is served
// (the budget holds one 12 MiB file's two copies at a time, not two), and
// every reservation is returned.
func TestRobustViewsTakeTurns(t *testing.T) {
	s, c, dir := budgetService(t)
	const size = 12 << 20
	wput(t, filepath.Join(dir, "pic"), strings.Repeat("p", size))
	// Long enough for eight views one after another on a loaded machine.
	s.budgets.memory = admit.New("bytes of memory budget", int64(64<<20)-admit.MemoryReserve, time.Minute)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			resp, err := c.View(context.Background(), &fsmcpv1.ViewRequest{Path: []byte("pic")})
			if err == nil && len(resp.GetData()) != size {
				err = fmt.Errorf("%d bytes", len(resp.GetData()))
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("view: %v", err)
		}
	}
	budgetFree(t, s)
}

// fs_digest reserves each directory's listing (and the payload digesting
// it builds) while it digests the directory's children: with the budget
// taken it waits, then is unavailable; with it free, it answers the same
// digest as always and returns its reservation.
func TestRobustDigestReservesMemory(t *testing.T) {
	s, c, dir := budgetService(t)
	capacity := int64(64<<20) - admit.MemoryReserve
	ctx := context.Background()
	sub := filepath.Join(dir, "many")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		wput(t, filepath.Join(sub, fmt.Sprintf("entry-%04d", i)), "x")
	}
	digest := func() (*fsmcpv1.DigestResponse, error) {
		stream, err := c.Digest(ctx, &fsmcpv1.DigestRequest{Path: []byte("many")})
		if err != nil {
			return nil, err
		}
		for {
			m, err := stream.Recv()
			if err != nil || m.GetDone() {
				return m, err
			}
		}
	}
	want, err := digest()
	if err != nil {
		t.Fatal(err)
	}
	budgetFree(t, s)
	// 200 names of 10 bytes: 200×(16+4+32) + 2×2,000 bytes, more than the
	// 1,000 left free.
	held, err := s.reserve(ctx, "test", "", capacity-1000)
	if err != nil {
		t.Fatal(err)
	}
	_, err = digest()
	if e := errorOf(err); e.GetCode() != fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE || !strings.Contains(e.GetMessage(), "memory budget") {
		t.Fatalf("digest of a 200-entry directory with 1,000 bytes of the budget free: %v, want unavailable", err)
	}
	held()
	got, err := digest()
	if err != nil || got.GetTreeSha256() != want.GetTreeSha256() || got.GetFiles() != 200 {
		t.Fatalf("digest with the budget free: %v %v, want %s over 200 files", got, err, want.GetTreeSha256())
	}
	budgetFree(t, s)
}
