package command

import "testing"

// An ExecRequest's protected paths are "" (the whole root) or clean
// root-relative paths, any bytes (glob metacharacters included); anything
// else is refused rather than handed to the shim.
func TestProtectedPaths(t *testing.T) {
	good := [][]byte{[]byte(""), []byte(".githooks"), []byte("a/b*[c]"), []byte("d/\xff")}
	got, err := protectedPaths(good)
	if err != nil || len(got) != len(good) || got[2] != "a/b*[c]" {
		t.Errorf("protectedPaths(%q) = %q, %v", good, got, err)
	}
	for _, bad := range []string{"/abs", ".", "..", "../up", "a/../b", "a/", "a//b", "a/./b", "a\x00b"} {
		if _, err := protectedPaths([][]byte{[]byte("ok"), []byte(bad)}); err == nil {
			t.Errorf("protectedPaths accepted %q", bad)
		}
	}
}
