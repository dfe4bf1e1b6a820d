package worker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

func readLine(t *testing.T, s *Service, p string, line, lines int64) *fsmcpv1.ReadResponse {
	t.Helper()
	resp, err := s.Read(context.Background(), &fsmcpv1.ReadRequest{Path: []byte(p), ByLine: true, Line: line, Lines: lines, Length: 1 << 16})
	if err != nil {
		t.Fatalf("Read(%s, line %d) = %v", p, line, err)
	}
	return resp
}

// TestLineIndexHits: the first read of a deep line scans up to it, and a
// later read of the same version scans at most one stride; a tail numbers
// itself once, after which tails scan nothing. Every answer agrees with a
// count made here.
func TestLineIndexHits(t *testing.T) {
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
	s := newTestService(t, dir)
	s.lines.settle = 0
	scanned := func() int64 {
		s.lines.mu.Lock()
		defer s.lines.mu.Unlock()
		return s.lines.scanned
	}
	check := func(line int64) {
		t.Helper()
		r := readLine(t, s, "f", line, 1)
		want := line
		if line < 0 {
			want = int64(len(starts)) + line + 1
		}
		if r.GetFirstLine() != want || r.GetOffset() != starts[want-1] || !bytes.HasPrefix(body[r.GetOffset():], r.GetData()) ||
			r.GetData()[len(r.GetData())-1] != '\n' || len(r.GetLineEnds()) != 1 {
			t.Fatalf("line %d: first_line %d offset %d, want line %d at %d", line, r.GetFirstLine(), r.GetOffset(), want, starts[want-1])
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
	if err := os.WriteFile(filepath.Join(dir, "f"), append([]byte("new first line\n"), body...), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := readLine(t, s, "f", 2, 1); string(r.GetData()) != "1 x\n" {
		t.Errorf("line 2 of the new version = %q", r.GetData())
	}
	if r := readLine(t, s, "f", -1, 1); r.GetFirstLine() != 200001 {
		t.Errorf("last line of the new version is %d", r.GetFirstLine())
	}
}

// TestLineIndexBounded: however many files are read, the index keeps at
// most maxIndexedFiles versions and maxMarks marks.
func TestLineIndexBounded(t *testing.T) {
	dir := t.TempDir()
	s := newTestService(t, dir)
	s.lines.settle = 0
	body := bytes.Repeat([]byte("line\n"), 30000) // 150 KB: 3 marks
	for i := range maxIndexedFiles + 50 {
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := readLine(t, s, name, -1, 1); r.GetFirstLine() != 30000 {
			t.Fatalf("%s: last line %d", name, r.GetFirstLine())
		}
	}
	s.lines.mu.Lock()
	defer s.lines.mu.Unlock()
	if len(s.lines.files) != maxIndexedFiles || len(s.lines.order) != maxIndexedFiles || s.lines.marks > maxMarks {
		t.Errorf("index holds %d files (%d in order), %d marks", len(s.lines.files), len(s.lines.order), s.lines.marks)
	}
	if got, want := strideFor(1<<40), int64(1<<40/maxMarksPerFile)*2; got != want {
		t.Errorf("stride of 1 TiB = %d, want %d", got, want)
	}
}
