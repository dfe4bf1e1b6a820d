package worker

import (
	"bytes"
	"encoding/binary"
)

// Glob's sort by mtime orders paths newest first, ties by path bytes, and
// pages them with the same keyed page as by path: the key is the mtime,
// inverted and big-endian so that bytes order it newest first, then the
// path. A cursor is the key of the last path of a page, so a page never
// repeats or skips a path whose mtime did not change; a path that changed
// moves to its new place, before or after the cursor.

const mtimeKeyBytes = 8

func mtimeKey(mtime int64, p []byte) []byte {
	return append(appendDescending(make([]byte, 0, mtimeKeyBytes+len(p)), mtime), p...)
}

// appendDescending appends n to b so that bytes order larger numbers
// first: fs_list's sorts by size and mtime key entries the same way.
func appendDescending(b []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(b, ^(uint64(n) ^ 1<<63))
}

func splitMtimeKey(k []byte) (int64, []byte) {
	return int64(^binary.BigEndian.Uint64(k) ^ 1<<63), k[mtimeKeyBytes:]
}

func newMtimePage(after []byte, afterMtime int64, hasAfter bool, budget int64) *pathPage {
	var k []byte
	if hasAfter {
		k = mtimeKey(afterMtime, after)
	}
	return newKeyedPage(k, hasAfter, budget, func(k []byte) []byte { return k },
		func(k []byte) int64 { return int64(len(k)) + pathAllowance + mtimeAllowance }, bytes.Clone)
}

// mtimeAllowance is what a listed mtime adds to the reply.
const mtimeAllowance = 48

// mtimeKey returns the sort key of the root-relative path p, lstat'ed
// through the Root, or false if p is gone.
func (s *Service) mtimeKey(p []byte) ([]byte, bool) {
	st, err := s.lstat(string(p))
	if err != nil {
		return nil, false
	}
	return mtimeKey(st.Mtim.Nano(), p), true
}
