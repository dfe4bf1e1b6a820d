package worker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// os.Root's escape error is unexported; isEscape matches its text. Pin
// that with real escapes, so a Go release that rewords it fails here
// instead of turning outside_root into internal.
func TestIsEscapePinnedToRealEscapes(t *testing.T) {
	base := t.TempDir()
	rootDir := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(rootDir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "outside"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"rel": "../outside", "abs": filepath.Join(base, "outside")} {
		if err := os.Symlink(target, filepath.Join(rootDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"../outside", "rel", "abs", "/etc/passwd", "a/../../outside"} {
		_, err := root.Open(p)
		if err == nil {
			t.Fatalf("Open(%q) escaped the root", p)
		}
		if !isEscape(err) {
			t.Errorf("isEscape(Open(%q) error %v) = false", p, err)
		}
		if e := fsError("open", p, err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT {
			t.Errorf("fsError(Open(%q)) = %v, want outside_root", p, e.Code)
		}
	}
	_, err = root.Open("missing")
	if isEscape(err) || !errors.Is(fsError("open", "missing", err), &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) {
		t.Errorf("Open(missing) = %v, want not_found and no escape", err)
	}
}
