package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// newLimitedService is newWriteService with the given budgets.
func newLimitedService(t *testing.T, l Limits) (*Service, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	s, err := New(root, Options{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
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
	s, dir := newLimitedService(t, Limits{MaxFileBytes: maxFile, MemoryBytes: 64 << 20})
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

// countMatches agrees with bytes.Count across its chunk boundaries.
func TestRobustCountMatchesChunks(t *testing.T) {
	data := []byte(strings.Repeat("ab", ctxEvery) + "aba")
	for _, old := range []string{"a", "ab", "ba", "bab", "aba", "b" + strings.Repeat("ab", 10)} {
		got, err := countMatches(context.Background(), data, []byte(old))
		if want := int64(strings.Count(string(data), old)); err != nil || got != want {
			t.Errorf("countMatches(%q) = %d, %v; want %d", old, got, err, want)
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
