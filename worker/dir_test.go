package worker

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// FuzzOpenDir: whatever directory OpenDir opens for a command's working
// directory lies beneath the root, never the canary directory beside it,
// however the path is spelled ("..", escaping and absolute symlinks,
// loops, NUL).
func FuzzOpenDir(f *testing.F) {
	base, s, _ := fuzzTree(f)
	inside := map[[2]uint64]bool{}
	err := filepath.Walk(filepath.Join(base, "root"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			st := fi.Sys().(*syscall.Stat_t)
			inside[[2]uint64{st.Dev, st.Ino}] = true
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", ".", "/", "d", "d/e", "..", "../canary", "dirout", "d/e/upup", "abs", "loop",
		"d/../..", "d/e/../../../canary", "//d", "d\x00", "in", "out"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		d, err := OpenDir(s.root, p)
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
	_, s, _ := fuzzTree(t)
	for p, want := range map[string]fsmcpv1.ErrorCode{
		"..":       fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT,
		"dirout":   fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT,
		"d/e/upup": fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT,
		"missing":  fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND,
		"f":        fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY,
		"d\x00":    fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT,
	} {
		_, err := OpenDir(s.root, []byte(p))
		var e *Error
		if !errors.As(err, &e) || e.Code != want {
			t.Errorf("OpenDir(%q) = %v, want %v", p, err, want)
		}
	}
}
