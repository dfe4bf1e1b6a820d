package lines

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// locate opens p and locates line in it with x.
func locate(t *testing.T, x *Index, p string, line int64) (offset, first int64) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	offset, first, err = x.Locate(context.Background(), f, &st, line)
	if err != nil {
		t.Fatalf("Locate(%s, line %d) = %v", p, line, err)
	}
	return offset, first
}

// TestIndexHits: the first read of a deep line scans up to it, and a
// later read of the same version scans at most one stride; a tail numbers
// itself once, after which tails scan nothing. Every answer agrees with a
// count made here.
func TestIndexHits(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	var starts []int64
	for i := 1; i <= 200000; i++ {
		starts = append(starts, int64(b.Len()))
		fmt.Fprintf(&b, "%d %s\n", i, bytes.Repeat([]byte("x"), i%37))
	}
	body := b.Bytes()
	if err := os.WriteFile(filepath.Join(dir, "f"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	x := NewIndex()
	x.settle = 0
	f := filepath.Join(dir, "f")
	scanned := func() int64 {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.scanned
	}
	check := func(line int64) {
		t.Helper()
		off, first := locate(t, x, f, line)
		want := line
		if line < 0 {
			want = int64(len(starts)) + line + 1
		}
		if first != want || off != starts[want-1] {
			t.Fatalf("line %d: first_line %d offset %d, want line %d at %d", line, first, off, want, starts[want-1])
		}
	}
	check(180000)
	first := scanned()
	if first < starts[179999] {
		t.Fatalf("first read scanned %d bytes, before line 180000 are %d", first, starts[179999])
	}
	for _, l := range []int64{180000, 179000, 2, 100000} {
		before := scanned()
		check(l)
		if d := scanned() - before; d > 0 {
			t.Errorf("line %d, within the marks: %d bytes scanned to count", l, d)
		}
	}
	check(-1)
	check(-5000)
	before := scanned()
	for _, l := range []int64{-1, -2, -199999, -200000, 199999, 200000} {
		check(l)
	}
	if d := scanned() - before; d > 0 {
		t.Errorf("after a complete count, %d bytes scanned to count", d)
	}
	// A new version is a new key: its count starts again.
	head := []byte("new first line\n")
	if err := os.WriteFile(f, append(head, body...), 0o644); err != nil {
		t.Fatal(err)
	}
	if off, _ := locate(t, x, f, 2); off != int64(len(head)) {
		t.Errorf("line 2 of the new version at %d, want %d", off, len(head))
	}
	if _, first := locate(t, x, f, -1); first != 200001 {
		t.Errorf("last line of the new version is %d", first)
	}
}

// TestIndexBounded: however many files are read, the index keeps at
// most maxIndexedFiles versions and maxMarks marks.
func TestIndexBounded(t *testing.T) {
	dir := t.TempDir()
	x := NewIndex()
	x.settle = 0
	body := bytes.Repeat([]byte("line\n"), 30000) // 150 KB: 3 marks
	for i := range maxIndexedFiles + 50 {
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, first := locate(t, x, filepath.Join(dir, name), -1); first != 30000 {
			t.Fatalf("%s: last line %d", name, first)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.files) != maxIndexedFiles || len(x.order) != maxIndexedFiles || x.marks > maxMarks {
		t.Errorf("index holds %d files (%d in order), %d marks", len(x.files), len(x.order), x.marks)
	}
	if got, want := strideFor(1<<40), int64(1<<40/maxMarksPerFile)*2; got != want {
		t.Errorf("stride of 1 TiB = %d, want %d", got, want)
	}
}
