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

// RenameNoReplace renames without replacing an existing newname. A
// filesystem without RENAME_NOREPLACE gets link then unlink, which is
// equally unable to replace.
func RenameNoReplace(olddir int, oldname string, newdir int, newname string) error {
	err := unix.Renameat2(olddir, oldname, newdir, newname, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(olddir, oldname, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return err
	}
	if err := unix.Linkat(olddir, oldname, newdir, newname, 0); err != nil {
		return err
	}
	return unix.Unlinkat(olddir, oldname, 0)
}

// OpenRegular opens the regular file name in dirfd, never following a
// symlink nor blocking on a fifo.
func OpenRegular(dirfd int, name string, mode int) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, mode|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, unix.EINVAL
	}
	return f, nil
}

// MoveTail moves the bytes of f from size to end into a new file name in
// the quarantine qfd, durable (the file and its name), then cuts f to
// size and syncs it. On failure f is whole and name gone.
func MoveTail(f *os.File, size, end int64, qfd int, name string) error {
	fd, err := unix.Openat(qfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	tail := os.NewFile(uintptr(fd), name)
	defer tail.Close()
	_, err = io.Copy(tail, io.NewSectionReader(f, size, end-size))
	if err == nil {
		err = tail.Sync()
	}
	if err == nil {
		err = unix.Fsync(qfd)
	}
	if err == nil {
		err = f.Truncate(size)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		unix.Unlinkat(qfd, name, 0)
	}
	return err
}

// ReadFullCtx is io.ReadFull checking ctx every step bytes.
func ReadFullCtx(ctx context.Context, f *os.File, buf []byte, step int) (int, error) {
	n := 0
	for n < len(buf) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := io.ReadFull(f, buf[n:min(len(buf), n+step)])
		if err == io.EOF && n > 0 {
			err = io.ErrUnexpectedEOF
		}
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// MoveByCopy copies the regular file name in fromFD, up to limit bytes,
// to the new file to in toFD, and removes name.
func MoveByCopy(fromFD int, name string, toFD int, to string, limit int64) error {
	in, err := unix.Openat(fromFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(in), name)
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file")
	}
	out, err := unix.Openat(toFD, to, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(out), to)
	_, err = io.Copy(dst, io.LimitReader(src, limit))
	if err == nil {
		err = dst.Sync()
	}
	dst.Close()
	if err != nil {
		unix.Unlinkat(toFD, to, 0)
		return err
	}
	return unix.Unlinkat(fromFD, name, 0)
}

// Lstatat is the lstat of name in the directory dirfd: a final symlink
// is not followed.
func Lstatat(dirfd int, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return &st, nil
}

// Fstat is the fstat of the open file f.
func Fstat(f *os.File) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	return &st, nil
}
