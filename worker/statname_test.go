package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// TestStatNameInRoot holds statName's shortcut for a name in the root
// (no directory opened and named) to a plain lstat of the host path, and
// to the resolution every deeper name takes: the same entries, one level
// down, give the same lstat and the same real path under "sub/".
func TestStatNameInRoot(t *testing.T) {
	s, dir := newServiceIn(t, Options{})
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, sub} {
		if err := os.WriteFile(filepath.Join(d, "file"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{"link": "file", "up": "../..", "abs": "/etc/passwd", "dangling": "nowhere"} {
			if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
				t.Fatal(err)
			}
		}
		if err := syscall.Mkfifo(filepath.Join(d, "fifo"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(d, "dir"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "new\nline"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"file", "link", "up", "abs", "dangling", "fifo", "dir", "new\nline"} {
		for _, prefix := range []string{"", "sub/"} {
			n, err := s.statName(context.Background(), "lstat", []byte(prefix+name))
			if err != nil {
				t.Fatalf("statName(%q): %v", prefix+name, err)
			}
			var want unix.Stat_t
			if err := unix.Lstat(filepath.Join(dir, prefix+name), &want); err != nil {
				t.Fatal(err)
			}
			got := n.st
			if got.Dev != want.Dev || got.Ino != want.Ino || got.Mode != want.Mode || got.Size != want.Size ||
				got.Nlink != want.Nlink || got.Mtim != want.Mtim || got.Ctim != want.Ctim {
				t.Fatalf("statName(%q) = %+v, lstat %+v", prefix+name, *got, want)
			}
			if n.rel != prefix+name || n.p != prefix+name {
				t.Fatalf("statName(%q): real path %q, path %q", prefix+name, n.rel, n.p)
			}
		}
	}
	for _, raw := range []string{"missing", "sub/missing"} {
		_, err := s.statName(context.Background(), "lstat", []byte(raw))
		var e *Error
		if !errors.As(err, &e) || e.Code != fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND {
			t.Fatalf("statName(%q) = %v, want not_found", raw, err)
		}
	}
}
