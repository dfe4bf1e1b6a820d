package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
	"golang.org/x/sys/unix"
)

func newTestService(t *testing.T, dir string) *Service {
	t.Helper()
	return newServiceWith(t, dir, Options{})
}

// newServiceWith is a Service with opts over dir, closed with the test.
func newServiceWith(t *testing.T, dir string, opts Options) *Service {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if opts.State == nil {
		opts.State = stateFor(t, dir)
	}
	s, err := New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newServiceIn is a Service with opts over a fresh directory, and that
// directory.
func newServiceIn(t *testing.T, opts Options) (*Service, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return newServiceWith(t, dir, opts), dir
}

func statSum(t *testing.T, s *Service, p string) string {
	t.Helper()
	resp, err := s.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte(p)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSha256()
}

// A repeated stat of an unchanged file is answered from the cache without
// reading it; a rewrite that keeps size and mtime is still detected,
// through ctime.
func TestHashCache(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	old := bytes.Repeat([]byte("a"), 1<<20)
	if err := os.WriteFile(p, old, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestService(t, dir)
	s.hashes.Settle = 0
	want := sha256.Sum256(old)
	if got := statSum(t, s, "f"); got != hex.EncodeToString(want[:]) {
		t.Fatalf("sha256 = %s", got)
	}
	read := s.hashes.Hashed.Load()
	if read != int64(len(old)) {
		t.Fatalf("hashed %d bytes, want %d", read, len(old))
	}
	if got := statSum(t, s, "f"); got != hex.EncodeToString(want[:]) || s.hashes.Hashed.Load() != read {
		t.Fatalf("second stat read the file again (%d bytes hashed)", s.hashes.Hashed.Load())
	}

	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	updated := bytes.Repeat([]byte("b"), len(old))
	if err := os.WriteFile(p, updated, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(p); fi2.Size() != fi.Size() || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatal("could not keep size and mtime")
	}
	want = sha256.Sum256(updated)
	if got := statSum(t, s, "f"); got != hex.EncodeToString(want[:]) {
		t.Fatalf("same-size, same-mtime rewrite not detected: sha256 %s", got)
	}
}

// A file changed too recently is not cached: its next change could land in
// the same timestamp tick.
func TestHashCacheSettles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestService(t, dir)
	s.hashes.Settle = time.Hour
	statSum(t, s, "f")
	statSum(t, s, "f")
	if got := s.hashes.Hashed.Load(); got != 2 {
		t.Fatalf("hashed %d bytes, want 2 (no caching of a fresh file)", got)
	}
}

// A stat answered from the cache, without opening the file, still refuses
// the sha256 of another name of a denied file: the hash of "twin" is
// cached before the worker has met "secret.key"; once it has, the twin's
// cached hash is not given.
func TestHashCacheStatKeepsLinkJudgement(t *testing.T) {
	s, dir := newServiceIn(t, Options{Policy: sandbox.Policy{Deny: []string{"*.key"}}})
	s.hashes.Settle = 0
	secret := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(secret, []byte("DENIED-CONTENT"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(dir, "twin")); err != nil {
		t.Fatal(err)
	}
	if statSum(t, s, "twin") == "" {
		t.Fatal("before the denied name was met, the twin's sha256 is given")
	}
	if _, ok := s.hashes.Get(hashcache.KeyOf(lstatOf(t, filepath.Join(dir, "twin")))); !ok {
		t.Fatal("the twin's hash was not cached: the test would not reach the cached path")
	}
	if got := statSum(t, s, "secret.key"); got != "" {
		t.Fatalf("a denied file's stat gives its sha256 %s", got)
	}
	hashed := s.hashes.Hashed.Load()
	resp, err := s.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte("twin")})
	if err == nil && resp.GetSha256() != "" {
		t.Fatalf("the twin's cached sha256 %s is given after its denied name was met", resp.GetSha256())
	}
	if s.hashes.Hashed.Load() != hashed {
		t.Fatal("the refused twin was read")
	}
}

func lstatOf(t *testing.T, p string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}
