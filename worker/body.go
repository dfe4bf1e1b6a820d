package worker

import (
	"context"
	"crypto/sha256"
	"os"
	"sync/atomic"

	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
	"golang.org/x/sys/unix"
)

// body is what commit puts in the new file: data, whole, or (spliced) the
// current file's bytes with delete bytes at off replaced by insert. A
// spliced body is copied file to file by the kernel, so the unchanged part
// of a large file never passes through the worker's memory.
type body struct {
	data    []byte
	spliced bool
	off     int64
	delete  int64
	insert  []byte
	// mode is the mode of a new file; 0 means newFileMode.
	mode uint32
	// meta, when set, is the file whose owner, extended attributes and
	// inode flags the new file takes instead of the current file's (a
	// rewind's kept version); mode, when set, then overrides its mode.
	meta *os.File
}

// size is the length of the new content; cur is the file it splices.
func (b *body) size(cur *current) int64 {
	if !b.spliced {
		return int64(len(b.data))
	}
	return cur.st.Size - b.delete + int64(len(b.insert))
}

// sha256 hashes the new content without writing it: a spliced body reads
// the current file around the inserted bytes, except that an append to a
// file whose digest state is known (cur.state) hashes only what it adds.
// hashed counts the bytes read from the current file.
func (b *body) sha256(ctx context.Context, cur *current, hashed *atomic.Int64) (hashcache.Sum, error) {
	size := b.size(cur)
	if !b.spliced {
		h := sha256.New()
		h.Write(b.data)
		return hashcache.SumOf(h, size), nil
	}
	if b.delete == 0 && b.off == cur.st.Size {
		if h := hashcache.ResumeSHA256(cur.state); h != nil {
			h.Write(b.insert)
			return hashcache.SumOf(h, size), nil
		}
	}
	h := sha256.New()
	if err := fileio.HashRange(ctx, h, cur.f, 0, b.off); err != nil {
		return hashcache.Sum{}, err
	}
	h.Write(b.insert)
	if err := fileio.HashRange(ctx, h, cur.f, b.off+b.delete, cur.st.Size); err != nil {
		return hashcache.Sum{}, err
	}
	hashed.Add(cur.st.Size - b.delete)
	return hashcache.SumOf(h, size), nil
}

// fill writes the body into the empty temp file dst.
func (b *body) fill(ctx context.Context, cur *current, dst *os.File) error {
	if !b.spliced {
		_, err := dst.Write(b.data)
		return err
	}
	// An append clones the whole file where the filesystem shares extents
	// (btrfs, XFS): no data is copied at all.
	if b.delete == 0 && b.off == cur.st.Size && b.off > 0 &&
		unix.IoctlFileClone(int(dst.Fd()), int(cur.f.Fd())) == nil {
		_, err := dst.WriteAt(b.insert, b.off)
		return err
	}
	if err := fileio.CopyRange(ctx, cur.f, dst, 0, 0, b.off); err != nil {
		return err
	}
	if _, err := dst.WriteAt(b.insert, b.off); err != nil {
		return err
	}
	return fileio.CopyRange(ctx, cur.f, dst, b.off+b.delete, b.off+int64(len(b.insert)), cur.st.Size-b.off-b.delete)
}
