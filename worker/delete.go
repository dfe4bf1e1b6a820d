package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// maxWalkDepth bounds a recursive walk: each level holds one descriptor.
const maxWalkDepth = 1024

// Delete implements fsmcpv1.WorkerServiceServer. It removes a file, a
// symlink (never what it points to) or an empty directory; a directory
// with entries only with recursive.
func (s *Service) Delete(ctx context.Context, req *fsmcpv1.DeleteRequest) (*fsmcpv1.DeleteResponse, error) {
	p, err := clientPath(req.GetPath())
	if err != nil {
		return nil, err
	}
	if p == "." {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "delete: the root cannot be deleted")
	}
	d, base, unlockRenames, err := s.openMutationPath("delete", p, accessMutate)
	if err != nil {
		return nil, err
	}
	defer unlockRenames()
	defer d.close()
	st, err := fstatat(d.fd, base)
	if err != nil {
		return nil, fsError("delete", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		err := unix.Unlinkat(d.fd, base, 0)
		if errors.Is(err, unix.EISDIR) {
			// Swapped for a directory since the lstat: refuse rather than
			// remove what the client did not see.
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "delete: the path changed to a directory")
		}
		if err != nil {
			return nil, fsError("delete", p, err)
		}
		return &fsmcpv1.DeleteResponse{Removed: 1}, nil
	}
	err = unix.Unlinkat(d.fd, base, unix.AT_REMOVEDIR)
	if err == nil {
		return &fsmcpv1.DeleteResponse{Removed: 1}, nil
	}
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return nil, fsError("delete", p, err)
	}
	if !req.GetRecursive() {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_EMPTY, p, "delete: the directory is not empty (recursive is not set)")
	}
	// Nothing is removed if anything beneath is protected.
	if err := s.judgeTree(ctx, "delete", p, d, base, ""); err != nil {
		return nil, err
	}
	w := &walker{ctx: ctx, path: p, beforeOpen: s.beforeDescend}
	if err := w.removeAll(d.fd, base, 0); err != nil {
		return nil, fsError("delete", p, err)
	}
	return &fsmcpv1.DeleteResponse{Removed: w.removed}, nil
}

// walker removes a directory tree through descriptors. Each directory is
// opened relative to its parent's descriptor with O_NOFOLLOW|O_DIRECTORY,
// and each entry is removed relative to its directory's descriptor, so a
// symlink is never followed, even one swapped in for a directory during the
// walk: it is removed as a name, like a file.
type walker struct {
	ctx        context.Context
	path       string
	removed    int64
	beforeOpen func(name string)
}

func (w *walker) removeAll(parentFD int, name string, depth int) error {
	if depth > maxWalkDepth {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, w.path, "delete: the tree is deeper than %d levels", maxWalkDepth)
	}
	for attempt := 0; ; attempt++ {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if w.beforeOpen != nil {
			w.beforeOpen(name)
		}
		fd, err := unix.Openat(parentFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		switch {
		case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			// No longer a directory (a symlink or file took its place):
			// remove the name itself.
			return w.unlink(parentFD, name, depth)
		case errors.Is(err, unix.ENOENT):
			return nil
		case err != nil:
			return err
		}
		err = w.empty(fd, depth)
		unix.Close(fd)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(parentFD, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil:
			w.removed++
			return nil
		case errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)) && attempt < 8:
			continue // entries were added during the walk
		}
		return err
	}
}

// empty removes every entry of the open directory fd.
func (w *walker) empty(fd, depth int) error {
	// Read the names through a duplicate, so closing the os.File leaves fd
	// to the caller.
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	for {
		names, err := f.Readdirnames(512)
		for _, n := range names {
			if err := w.unlink(fd, n, depth+1); err != nil {
				return err
			}
		}
		if err != nil || len(names) == 0 {
			return nil // io.EOF, or a directory removed under us
		}
	}
}

// unlink removes one name of the directory fd: a non-directory at once, a
// directory through removeAll.
func (w *walker) unlink(fd int, name string, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	err := unix.Unlinkat(fd, name, 0)
	switch {
	case err == nil:
		w.removed++
		return nil
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EISDIR):
		return w.removeAll(fd, name, depth)
	}
	return err
}

// Sweep removes temp files left by a crash anywhere under the root: only
// names with the temp prefix, only regular files last modified before
// olderThan, never through a symlink. The worker sweeps in the background
// while it serves, with olderThan its start time, so a large tree does not
// delay start-up and the temp files of this process's own writes (created
// after it started) are never touched. It reports how many it removed and
// the first error it met.
func (s *Service) Sweep(olderThan time.Time) (int, error) {
	f, err := s.root.Open(".")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sw := &sweeper{olderThan: olderThan.UnixNano()}
	sw.dir(int(f.Fd()), 0)
	return sw.removed, sw.err
}

type sweeper struct {
	olderThan int64
	removed   int
	err       error
}

func (sw *sweeper) fail(err error) {
	if sw.err == nil {
		sw.err = err
	}
}

func (sw *sweeper) dir(fd, depth int) {
	if depth > maxWalkDepth {
		sw.fail(fmt.Errorf("sweep: deeper than %d levels", maxWalkDepth))
		return
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		sw.fail(err)
		return
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		sw.fail(err)
	}
	for _, n := range names {
		st, err := fstatat(fd, n)
		if err != nil {
			continue // gone since readdir
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if isTempName(n) && st.Mtim.Nano() < sw.olderThan {
				if err := unix.Unlinkat(fd, n, 0); err != nil {
					sw.fail(err)
				} else {
					sw.removed++
				}
			}
		case unix.S_IFDIR:
			sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				sw.fail(err)
				continue
			}
			sw.dir(sub, depth+1)
			unix.Close(sub)
		}
	}
}

// sweepTemp runs Sweep for files older than start and logs the outcome; a
// failure to sweep does not stop the worker, it only leaves hidden files
// behind.
func sweepTemp(s *Service, start time.Time) {
	n, err := s.Sweep(start)
	if n > 0 {
		fmt.Fprintf(os.Stderr, "fsmcp worker: removed %d temp files left by an earlier crash\n", n)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp worker: sweeping temp files: %v\n", err)
	}
}
