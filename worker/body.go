package worker

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"sync/atomic"

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
func (b *body) sha256(ctx context.Context, cur *current, hashed *atomic.Int64) (fileSum, error) {
	size := b.size(cur)
	if !b.spliced {
		h := sha256.New()
		h.Write(b.data)
		return sumOf(h, size), nil
	}
	if b.delete == 0 && b.off == cur.st.Size {
		if h := resumeSHA256(cur.state); h != nil {
			h.Write(b.insert)
			return sumOf(h, size), nil
		}
	}
	h := sha256.New()
	if err := hashRange(ctx, h, cur.f, 0, b.off); err != nil {
		return fileSum{}, err
	}
	h.Write(b.insert)
	if err := hashRange(ctx, h, cur.f, b.off+b.delete, cur.st.Size); err != nil {
		return fileSum{}, err
	}
	hashed.Add(cur.st.Size - b.delete)
	return sumOf(h, size), nil
}

// hashRange feeds the bytes [from, to) of f to w.
func hashRange(ctx context.Context, w io.Writer, f *os.File, from, to int64) error {
	bp := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(bp)
	buf := *bp
	for from < to {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-from)], from)
		w.Write(buf[:n])
		from += int64(n)
		if err != nil && (err != io.EOF || from < to) {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
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
	if err := copyRange(ctx, cur.f, dst, 0, 0, b.off); err != nil {
		return err
	}
	if _, err := dst.WriteAt(b.insert, b.off); err != nil {
		return err
	}
	return copyRange(ctx, cur.f, dst, b.off+b.delete, b.off+int64(len(b.insert)), cur.st.Size-b.off-b.delete)
}

// copyRange copies n bytes of src at soff to dst at doff with
// copy_file_range, which the kernel serves by sharing extents (reflink) or
// copying inside the kernel. Where it is not offered (another filesystem
// type, an old kernel), it falls back to reading and writing through a
// buffer.
func copyRange(ctx context.Context, src, dst *os.File, soff, doff, n int64) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		so, do := soff, doff
		// At most 1 GiB a call, so cancellation is seen in between.
		c, err := unix.CopyFileRange(int(src.Fd()), &so, int(dst.Fd()), &do, int(min(n, 1<<30)), 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) ||
				errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
				return copyBuffered(ctx, src, dst, soff, doff, n)
			}
			return err
		}
		if c == 0 {
			return io.ErrUnexpectedEOF // the source shrank: commit's checks refuse it
		}
		soff, doff, n = soff+int64(c), doff+int64(c), n-int64(c)
	}
	return nil
}

// copyBuffered is copyRange through the worker's memory, one buffer at a
// time.
func copyBuffered(ctx context.Context, src, dst *os.File, soff, doff, n int64) error {
	bp := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(bp)
	buf := *bp
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := src.ReadAt(buf[:min(int64(len(buf)), n)], soff)
		if r > 0 {
			if _, werr := dst.WriteAt(buf[:r], doff); werr != nil {
				return werr
			}
		}
		soff, doff, n = soff+int64(r), doff+int64(r), n-int64(r)
		if err != nil && n > 0 {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
