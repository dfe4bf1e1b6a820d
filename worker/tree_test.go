package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
	"github.com/fsmcp/fsmcp/worker/internal/rglog"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"golang.org/x/sys/unix"
)

// TestWalkTreeIgnoredAndHidden lists a tree whose ignored and hidden
// directories hold thousands of files, in pages of 2 KiB: every page
// follows the last, and what is listed is exactly the tree outside them,
// an empty directory among them, with each file's size.
func TestWalkTreeIgnoredAndHidden(t *testing.T) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("no rg: ", err)
	}
	dir := t.TempDir()
	write := func(p string, n int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".ignore", 5)
	if err := os.WriteFile(filepath.Join(dir, ".ignore"), []byte("big/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2500 {
		write(fmt.Sprintf("big/d%d/f%d", i%7, i), 1)
		write(fmt.Sprintf(".hid/f%d", i), 1)
	}
	var want []string
	for i := range 60 {
		p := fmt.Sprintf("keep/%c/file%02d", 'a'+i%3, i)
		write(p, i)
		want = append(want, fmt.Sprintf("%s %v %d", p, fsmcpv1.FileType_FILE_TYPE_FILE, i))
	}
	for _, d := range []string{"keep", "keep/a", "keep/b", "keep/c", "keep/empty"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
		want = append(want, fmt.Sprintf("%s %v 0", d, fsmcpv1.FileType_FILE_TYPE_DIRECTORY))
	}
	slices.Sort(want)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	s, err := New(root, Options{RG: rg, DevNull: devNull})
	if err != nil {
		t.Fatal(err)
	}
	c := serveInProcess(t, s)
	var got []string
	req := &fsmcpv1.TreeRequest{MaxDepth: 16, MaxBytes: 2 << 10}
	for pages := 1; ; pages++ {
		msgs, err := workertest.Drain(c.Tree(context.Background(), req))
		if err != nil {
			t.Fatal(err)
		}
		last := msgs[len(msgs)-1].(*fsmcpv1.TreeResponse)
		if last.Total != int64(len(want)) {
			t.Fatalf("page %d: total %d, want %d", pages, last.Total, len(want))
		}
		for _, e := range last.Entries {
			got = append(got, fmt.Sprintf("%s %v %d", e.Path, e.Type, e.Size))
		}
		if !last.More {
			break
		}
		if pages > len(want) || len(last.Entries) == 0 {
			t.Fatalf("page %d: more, but %d entries", pages, len(last.Entries))
		}
		req.After, req.HasAfter = last.Entries[len(last.Entries)-1].Path, true
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed\n%q\nwant\n%q", got, want)
	}
}

// treeLines is one Tree page of everything, as "path type [more]" lines.
func treeLines(t *testing.T, c fsmcpv1.WorkerServiceClient, req *fsmcpv1.TreeRequest) []string {
	t.Helper()
	msgs, err := workertest.Drain(c.Tree(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1].(*fsmcpv1.TreeResponse)
	if last.More {
		t.Fatal("more than one page")
	}
	var out []string
	for _, e := range last.Entries {
		l := fmt.Sprintf("%s %v", e.Path, e.Type)
		if e.More {
			l += " more"
		}
		out = append(out, l)
	}
	return out
}

// Symlinks and fifos in directories rg names files in, names with a
// newline or with the log's own wording in them included, and an empty
// directory beside them; a symlink whose name is not UTF-8 reaches the
// log lossily: the listing is the same with it, and rg's verdicts
// (hidden, ignored) hold for symlinks either way.
func TestWalkTreeLearnsFromLog(t *testing.T) {
	s := newSearchService(t, admit.Limits{})
	dir := s.testDir
	wput(t, filepath.Join(dir, ".ignore"), "*.log\n")
	wput(t, filepath.Join(dir, "src", "a.go"), "package a")
	wput(t, filepath.Join(dir, "deep", "d1", "d2", "f.txt"), "f")
	wput(t, filepath.Join(dir, "lim", "l1", "l2", "g.txt"), "g")
	for _, d := range []string{"deep/d1/empty", "lim/only/sub"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := []string{"src/link", "src/odd\nname", "src/x" + rglog.SubjectMark + "file type: None, metadata: Err(x)", "src/.hidden", "src/skip.log", "lim/l1/l2/ln"}
	for _, l := range links {
		if err := os.Symlink("a.go", filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "src", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sym, dirT, fifo, file := fsmcpv1.FileType_FILE_TYPE_SYMLINK, fsmcpv1.FileType_FILE_TYPE_DIRECTORY, fsmcpv1.FileType_FILE_TYPE_FIFO, fsmcpv1.FileType_FILE_TYPE_FILE
	line := func(p string, typ fsmcpv1.FileType) string { return fmt.Sprintf("%s %v", p, typ) }
	want := []string{
		line("deep", dirT), line("deep/d1", dirT), line("deep/d1/d2", dirT), line("deep/d1/d2/f.txt", file), line("deep/d1/empty", dirT),
		line("lim", dirT), line("lim/l1", dirT), line("lim/l1/l2", dirT), line("lim/l1/l2/g.txt", file), line("lim/l1/l2/ln", sym),
		line("lim/only", dirT), line("lim/only/sub", dirT),
		line("src", dirT), line("src/a.go", file), line("src/fifo", fifo), line("src/link", sym), line("src/odd\nname", sym),
		line(links[2], sym),
	}
	slices.Sort(want)
	// At depth 2, lim/l1 has a directory below (more), and so has
	// lim/only (an empty one: more, since a call on it lists it).
	want2 := []string{
		line("deep", dirT), line("deep/d1", dirT) + " more", line("lim", dirT), line("lim/l1", dirT) + " more",
		line("lim/only", dirT) + " more", line("src", dirT), line("src/a.go", file), line("src/fifo", fifo),
		line("src/link", sym), line("src/odd\nname", sym), line(links[2], sym),
	}
	slices.Sort(want2)
	c := serveInProcess(t, s.Service)
	for _, lossy := range []bool{false, true} {
		if lossy {
			if err := os.Symlink("a.go", filepath.Join(dir, "src", "bad\xffname")); err != nil {
				t.Fatal(err)
			}
			want = append(want, line("src/bad\xffname", sym))
			want2 = append(want2, line("src/bad\xffname", sym))
			slices.Sort(want)
			slices.Sort(want2)
		}
		if got := treeLines(t, c, &fsmcpv1.TreeRequest{MaxDepth: 16}); !slices.Equal(got, want) {
			t.Errorf("lossy log %v, depth 16:\n got %q\nwant %q", lossy, got, want)
		}
		if got := treeLines(t, c, &fsmcpv1.TreeRequest{MaxDepth: 2}); !slices.Equal(got, want2) {
			t.Errorf("lossy log %v, depth 2:\n got %q\nwant %q", lossy, got, want2)
		}
	}
}

// fileType names no type for a mode that is no type.
func TestFileTypeOfNoType(t *testing.T) {
	if got := fileType(0o644); got != fsmcpv1.FileType_FILE_TYPE_OTHER {
		t.Errorf("fileType of a mode with no type = %v, want other", got)
	}
}

// Every symlink (to a file, to a directory, dangling, leading out of the
// root), fifo, socket and device is listed with its type at every depth
// up to max_depth, in directories that hold only files beside them, and
// a directory at the limit whose only child is a symlink to a directory
// has more; hidden and ignored names of symlinks, fifos and devices are
// left out as a file's would be.
func TestWalkTreeListsEverySymlink(t *testing.T) {
	s := newSearchService(t, admit.Limits{})
	dir := s.testDir
	wput(t, filepath.Join(dir, ".ignore"), "skip*\n")
	wput(t, filepath.Join(dir, "a", "b", "c", "f"), "f")
	wput(t, filepath.Join(dir, "a", "b", "g"), "g")
	if err := os.Mkdir(filepath.Join(dir, "a", "onlylink"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../b", filepath.Join(dir, "a", "onlylink", "ln")); err != nil {
		t.Fatal(err)
	}
	sym, dirT, fifo, sock, file := fsmcpv1.FileType_FILE_TYPE_SYMLINK, fsmcpv1.FileType_FILE_TYPE_DIRECTORY,
		fsmcpv1.FileType_FILE_TYPE_FIFO, fsmcpv1.FileType_FILE_TYPE_SOCKET, fsmcpv1.FileType_FILE_TYPE_FILE
	entries := map[string]fsmcpv1.FileType{"a": dirT, "a/b": dirT, "a/b/c": dirT, "a/b/c/f": file, "a/b/g": file,
		"a/onlylink": dirT, "a/onlylink/ln": sym}
	for _, d := range []string{"", "a", "a/b", "a/b/c"} {
		for name, target := range map[string]string{"todir": ".", "tofile": "x", "dangling": "nowhere", "out": "../../../../../.."} {
			if err := os.Symlink(target, filepath.Join(dir, d, name)); err != nil {
				t.Fatal(err)
			}
			entries[joinRel(d, name)] = sym
			for _, skip := range []string{".hidden-" + name, "skip-" + name} {
				if err := os.Symlink(target, filepath.Join(dir, d, skip)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := syscall.Mkfifo(filepath.Join(dir, d, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, skip := range []string{"skip-fifo", ".hidden-fifo"} {
			if err := syscall.Mkfifo(filepath.Join(dir, d, skip), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		entries[joinRel(d, "fifo")] = fifo
		// A device where the file system allows one (the null device's
		// numbers); a hidden one beside it.
		if err := unix.Mknod(filepath.Join(dir, d, "dev"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err == nil {
			entries[joinRel(d, "dev")] = fsmcpv1.FileType_FILE_TYPE_DEVICE
			must(t, unix.Mknod(filepath.Join(dir, d, ".hidden-dev"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))))
		} else {
			t.Logf("no device: %v", err)
		}
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: filepath.Join(dir, d, "sock")}); err != nil {
			t.Fatal(err)
		}
		entries[joinRel(d, "sock")] = sock
	}
	c := serveInProcess(t, s.Service)
	for depth := 1; depth <= 5; depth++ {
		var want []string
		for p, typ := range entries {
			if n := strings.Count(p, "/") + 1; n <= depth {
				l := fmt.Sprintf("%s %v", p, typ)
				// A directory at the limit with anything below it.
				if typ == dirT && n == depth && p != "a/b/c" || p == "a/b/c" && depth == 3 {
					l += " more"
				}
				want = append(want, l)
			}
		}
		slices.Sort(want)
		if got := treeLines(t, c, &fsmcpv1.TreeRequest{MaxDepth: int32(depth)}); !slices.Equal(got, want) {
			t.Errorf("depth %d:\n got %q\nwant %q", depth, got, want)
		}
	}
}
