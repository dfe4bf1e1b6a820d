package worker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// appendOnce appends data to p through Write with if_sha256 sum and
// returns the reply's sha256.
func appendOnce(t *testing.T, s *Service, p, sum string, data []byte) (string, error) {
	t.Helper()
	resp, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte(p), Content: data, IfSha256: sum, Append: true})
	return resp.GetSha256(), err
}

// newLogService serves a fresh directory holding log, 2 MiB, whose path
// and content it returns.
func newLogService(t *testing.T) (*Service, string, string, []byte) {
	t.Helper()
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "log")
	content := bytes.Repeat([]byte("x"), 2<<20)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return s, dir, p, content
}

// Successive appends to a large file read none of it for hashing after
// the first: the precondition is answered from the cache's entry for the
// version the last append placed, and the new sha256 continues the digest
// state kept with it. Every reply's sha256 is the file's.
func TestAppendStateHashesOnlyAppended(t *testing.T) {
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "log")
	content := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := wsum(content)
	read := s.hashes.Hashed.Load()
	for i := range 4 {
		line := []byte(strings.Repeat(string(rune('a'+i)), 1000) + "\n")
		var err error
		if sum, err = appendOnce(t, s, "log", sum, line); err != nil {
			t.Fatal(err)
		}
		content = append(content, line...)
		if got := wsum([]byte(wcontent(t, p))); got != sum || got != wsum(content) {
			t.Fatalf("append %d: reply sha256 %s, file %s", i, sum, got)
		}
		hashed := s.hashes.Hashed.Load() - read
		// The first append hashes the file once (the precondition); its
		// new sha256 continues that hash's state.
		if want := int64(3 << 20); hashed != want {
			t.Fatalf("after append %d, %d bytes were read for hashing, want %d (the first precondition only)", i, hashed, want)
		}
	}
}

// A write by another process to a file whose version the cache holds
// changes its ctime, even when it keeps size and mtime: the next append's
// precondition then hashes the file and refuses.
func TestAppendStateOutsideWriteRefused(t *testing.T) {
	s, _, p, content := newLogService(t)
	sum, err := appendOnce(t, s, "log", wsum(content), []byte("one\n"))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("y"), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	read := s.hashes.Hashed.Load()
	_, err = appendOnce(t, s, "log", sum, []byte("two\n"))
	e := wantWriteCode(t, "append after an outside write", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if want := wsum([]byte(wcontent(t, p))); e.CurrentSHA256 != want {
		t.Fatalf("current_sha256 %s, want the file's %s", e.CurrentSHA256, want)
	}
	if s.hashes.Hashed.Load() == read {
		t.Fatal("the precondition was answered from the cache after an outside write")
	}
	if strings.HasSuffix(wcontent(t, p), "two\n") {
		t.Fatal("the refused append was written")
	}
}

// A write by another process into the new file under its temp name,
// between the worker's last write and the rename, changes its mtime: the
// cache makes no entry for the placed version, so the next precondition
// (an append's) hashes the file and sees the difference. The write lands
// a tick after the worker's own, so even a kernel without multigrain
// timestamps sees it.
func TestAppendStateTempWriteNotCached(t *testing.T) {
	s, dir, _, content := newLogService(t)
	s.beforeCommit = func(string) {
		time.Sleep(20 * time.Millisecond)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Error(err)
			return
		}
		for _, e := range ents {
			if isTempName(e.Name()) {
				if err := os.WriteFile(filepath.Join(dir, e.Name()), append(bytes.Repeat([]byte("z"), 2<<20), "one\n"...), 0o644); err != nil {
					t.Error(err)
				}
			}
		}
	}
	resp, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("log"), Content: append(slices.Clone(content), "one\n"...), IfSha256: wsum(content)})
	if err != nil {
		t.Fatal(err)
	}
	sum := resp.GetSha256()
	s.beforeCommit = nil
	if sum != wsum(append(content, "one\n"...)) {
		t.Fatalf("reply sha256 %s is not of the worker's bytes", sum)
	}
	read := s.hashes.Hashed.Load()
	_, err = appendOnce(t, s, "log", sum, []byte("two\n"))
	wantWriteCode(t, "append after a write into the temp name", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if s.hashes.Hashed.Load() == read {
		t.Fatal("the placed version was cached although it was written after the worker's fstat")
	}
}
