package link

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

func TestClientPath(t *testing.T) {
	for in, want := range map[string]string{"": ".", "/": ".", "a": "a", "/a/b": "a/b", "//a": "/a", "a/../..": "a/../..", "\xff": "\xff"} {
		if got, err := ClientPath([]byte(in)); err != nil || got != want {
			t.Errorf("ClientPath(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"\x00", "a\x00", "/a/\x00b"} {
		_, err := ClientPath([]byte(in))
		if !errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT}) {
			t.Errorf("ClientPath(%q) = %v, want invalid_argument", in, err)
		}
	}
}

func TestIsSHA256Hex(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	if !IsSHA256Hex(good) {
		t.Errorf("IsSHA256Hex(%q) = false", good)
	}
	for _, bad := range []string{"", good[:63], good + "0", strings.ToUpper(good), good[:63] + "g", good[:63] + "\x00"} {
		if IsSHA256Hex(bad) {
			t.Errorf("IsSHA256Hex(%q) = true", bad)
		}
	}
}

// dirTree is a root with a directory, a file and symlinks that stay and
// leave, beside a canary directory outside it. It returns the root and
// the identities of the directories inside.
func dirTree(tb testing.TB) (*os.Root, map[[2]uint64]bool) {
	base := tb.TempDir()
	root := filepath.Join(base, "root")
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "d", "e"), 0o755))
	must(os.MkdirAll(filepath.Join(base, "canary", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "f"), []byte("inside\n"), 0o644))
	for name, target := range map[string]string{
		"in": "d", "dirout": "../canary", "abs": filepath.Join(base, "canary"),
		"d/up": "..", "d/e/upup": "../../../canary", "loop": "loop",
	} {
		must(os.Symlink(target, filepath.Join(root, name)))
	}
	r, err := os.OpenRoot(root)
	must(err)
	tb.Cleanup(func() { r.Close() })
	inside := map[[2]uint64]bool{}
	must(filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			st := fi.Sys().(*syscall.Stat_t)
			inside[[2]uint64{st.Dev, st.Ino}] = true
		}
		return err
	}))
	return r, inside
}

// FuzzOpenDir: whatever directory OpenDir opens for a command's working
// directory lies beneath the root, never the canary directory beside it,
// however the path is spelled ("..", escaping and absolute symlinks,
// loops, NUL); what it refuses carries a code.
func FuzzOpenDir(f *testing.F) {
	root, inside := dirTree(f)
	for _, seed := range []string{"", ".", "/", "d", "d/e", "..", "../canary", "dirout", "d/e/upup", "abs", "loop",
		"d/../..", "d/e/../../../canary", "//d", "d\x00", "in", "d/up", "f"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		d, err := OpenDir(root, p)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == fsmcpv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				t.Fatalf("OpenDir(%q) = %v, want an *Error with a code", p, err)
			}
			return
		}
		defer d.Close()
		fi, err := d.Stat()
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !inside[[2]uint64{st.Dev, st.Ino}] {
			t.Fatalf("OpenDir(%q) opened a directory outside the root", p)
		}
	})
}

// OpenDir's refusals carry the contract's codes.
func TestOpenDirRefusals(t *testing.T) {
	root, _ := dirTree(t)
	for p, want := range map[string]fsmcpv1.ErrorCode{
		"..":       fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT,
		"dirout":   fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT,
		"abs":      fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT,
		"d/e/upup": fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT,
		"missing":  fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND,
		"f":        fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY,
		"d\x00":    fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT,
	} {
		_, err := OpenDir(root, []byte(p))
		var e *Error
		if !errors.As(err, &e) || e.Code != want {
			t.Errorf("OpenDir(%q) = %v, want %v", p, err, want)
		}
	}
}
