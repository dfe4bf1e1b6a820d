package treesum

import (
	"crypto/sha256"
	"testing"
)

// A node's digest is sha256 of its type byte, its mode (big-endian) and
// its payload, and changes with each.
func TestNode(t *testing.T) {
	want := sha256.Sum256([]byte{'f', 0, 0, 0o1, 0xa4, 'x'})
	if got := Node(File, 0o644, []byte("x")); got != want {
		t.Errorf("Node(file, 0644, x) = %x, want %x", got, want)
	}
	base := Node(Dir, 0o755, []byte("p"))
	for _, other := range [][32]byte{Node(Other, 0o755, []byte("p")), Node(Dir, 0o700, []byte("p")), Node(Dir, 0o755, []byte("q"))} {
		if other == base {
			t.Errorf("a different node has the same digest %x", base)
		}
	}
}
