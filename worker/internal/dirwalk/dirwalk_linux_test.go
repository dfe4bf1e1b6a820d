package dirwalk

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func mkTree(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func openDir(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// The walker visits every entry once, in batches or whole, walks into
// directories only, never through a symlink, and hands a tree deeper than
// MaxDepth to Fail.
func TestWalkerVisitsEveryEntry(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	mkTree(t, dir, "a/b/c/f", "a/g", "e/", "h")
	mkTree(t, outside, "secret")
	if err := os.Symlink(outside, filepath.Join(dir, "a", "out")); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "a/b", "a/b/c", "a/b/c/f", "a/g", "a/out", "e", "h"}
	for _, batch := range []int{0, 1, 512} {
		var got []string
		w := &Walker{Batch: batch,
			Visit: func(_ int, e fs.DirEntry, rel string) (bool, error) {
				got = append(got, rel)
				return true, nil
			},
			Fail: func(rel string, err error) error { return err }}
		if err := w.Walk(openDir(t, dir), ""); err != nil {
			t.Fatalf("batch %d: Walk = %v", batch, err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("batch %d: visited %q, want %q", batch, got, want)
		}
	}
	deep := filepath.Join(dir, strings.Repeat("d/", MaxDepth+2))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &Walker{Visit: func(int, fs.DirEntry, string) (bool, error) { return true, nil },
		Fail: func(rel string, err error) error { return err }}
	if err := w.Walk(openDir(t, dir), ""); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Walk(too deep) = %v, want %v", err, ErrTooDeep)
	}
}

// The remover removes the tree and counts what it removed; a symlink in
// it, or in its place, to a directory outside goes as a name: what it
// points to stays.
func TestRemoverKeepsLinkTargets(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	mkTree(t, dir, "t/a/b/f", "t/a/g", "t/e/")
	mkTree(t, outside, "keep/canary")
	if err := os.Symlink(filepath.Join(outside, "keep"), filepath.Join(dir, "t", "a", "link")); err != nil {
		t.Fatal(err)
	}
	r := &Remover{Ctx: context.Background()}
	if err := r.RemoveAll(openDir(t, dir), "t"); err != nil {
		t.Fatal(err)
	}
	if r.Removed != 7 {
		t.Errorf("removed %d entries, want 7", r.Removed)
	}
	if _, err := os.Lstat(filepath.Join(dir, "t")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the tree is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep", "canary")); err != nil {
		t.Errorf("the link's target lost its file: %v", err)
	}
	// A symlink named as the tree itself (one swapped in for it) is
	// removed as a name, never opened.
	if err := os.Symlink(filepath.Join(outside, "keep"), filepath.Join(dir, "swapped")); err != nil {
		t.Fatal(err)
	}
	r = &Remover{Ctx: context.Background()}
	if err := r.RemoveAll(openDir(t, dir), "swapped"); err != nil || r.Removed != 1 {
		t.Errorf("RemoveAll(symlink) = %v, removed %d, want 1", err, r.Removed)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep", "canary")); err != nil {
		t.Errorf("the swapped-in link's target lost its file: %v", err)
	}
}
