package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/workertest"
)

// TestWalkTreeIgnoredBeyondSlack lists a tree whose ignored and hidden
// directories hold more files than the walk may run ahead of rg, in pages
// of 2 KiB: the walk waits for rg rather than list or stall, every page
// follows the last, and what is listed is exactly the tree outside them,
// with each file's size whether the walk stat'ed it or the page did.
func TestWalkTreeIgnoredBeyondSlack(t *testing.T) {
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
	for i := range treeSlack + 500 {
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
