package treesum

import (
	"crypto/sha256"
	"encoding/binary"
)

// The node types.
const (
	File    = 'f'
	Dir     = 'd'
	Symlink = 'l'
	Other   = 'o'
)

// Node is the digest of a node of type typ, mode and payload.
func Node(typ byte, mode uint32, payload []byte) [32]byte {
	h := sha256.New()
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], mode)
	h.Write(hdr[:])
	h.Write(payload)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// ListingBytes is what a directory's listing of names holds in memory,
// and the payload digesting it appends: each name twice, a string header
// per name, and a length and a digest per child.
func ListingBytes(names []string) int64 {
	n := int64(len(names)) * (16 + 4 + sha256.Size)
	for _, name := range names {
		n += 2 * int64(len(name))
	}
	return n
}
