package fileio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Buffers holds the 256 KiB buffers files are streamed through.
var Buffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// HashRange feeds the bytes [from, to) of f to w.
func HashRange(ctx context.Context, w io.Writer, f *os.File, from, to int64) error {
	bp := Buffers.Get().(*[]byte)
	defer Buffers.Put(bp)
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

// CopyRange copies n bytes of src at soff to dst at doff with
// copy_file_range, which the kernel serves by sharing extents (reflink) or
// copying inside the kernel. Where it is not offered (another filesystem
// type, an old kernel), it falls back to reading and writing through a
// buffer.
func CopyRange(ctx context.Context, src, dst *os.File, soff, doff, n int64) error {
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

// copyBuffered is CopyRange through the worker's memory, one buffer at a
// time.
func copyBuffered(ctx context.Context, src, dst *os.File, soff, doff, n int64) error {
	bp := Buffers.Get().(*[]byte)
	defer Buffers.Put(bp)
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

// CountLines counts the newlines in the first n bytes of f.
func CountLines(ctx context.Context, f *os.File, n int64) (int, error) {
	c := &lineCounter{}
	err := HashRange(ctx, c, f, 0, n)
	return c.n, err
}

type lineCounter struct{ n int }

func (c *lineCounter) Write(b []byte) (int, error) {
	c.n += bytes.Count(b, []byte("\n"))
	return len(b), nil
}
