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
	g, err := newGuard(p, req.GetIfSha256(), req.GetIfTreeSha256())
	if err != nil {
		return nil, err
	}
	defer g.close()
	// A guarded delete renames the entry aside before removing it, and a
	// quarantine takes it out of the root: either holds s.renames
	// exclusively, as a move does, since the entry may be a directory.
	unlockRenames := s.lockRenames(g != nil || s.quarantine != nil)
	defer unlockRenames()
	d, base, err := s.openName(ctx, "delete", p, accessMutate)
	if err != nil {
		return nil, err
	}
	defer d.close()
	name, judged := base, false
	if g != nil {
		unlock, err := s.locks.lock(ctx, lockKey{d.st.Dev, d.st.Ino, base})
		if err != nil {
			return nil, fsError("delete", p, err)
		}
		defer unlock()
		// The tree is judged by its real names, before it is renamed.
		if st, err := fstatat(d.fd, base); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && req.GetRecursive() {
			if err := s.judgeTree(ctx, "delete", p, d, base, ""); err != nil {
				return nil, err
			}
			judged = true
		}
		if name, err = s.guardAside(ctx, g, d, base, p, req.GetRecursive()); err != nil {
			return nil, err
		}
	}
	st, err := fstatat(d.fd, name)
	if err != nil {
		return nil, fsError("delete", p, err)
	}
	if s.quarantine != nil && quarantinable(st) {
		return s.deleteToQuarantine(ctx, d, name, base, p, st, req.GetRecursive(), judged)
	}
	return s.unlinkName(ctx, d, name, p, st, req.GetRecursive(), judged)
}

// unlinkName removes base from d for good: a file at once, a directory
// when empty or, with recursive, with everything beneath it.
// judged says the tree beneath was judged already.
func (s *Service) unlinkName(ctx context.Context, d *parent, base, p string, st *unix.Stat_t, recursive, judged bool) (*fsmcpv1.DeleteResponse, error) {
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
	err := unix.Unlinkat(d.fd, base, unix.AT_REMOVEDIR)
	if err == nil {
		return &fsmcpv1.DeleteResponse{Removed: 1}, nil
	}
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return nil, fsError("delete", p, err)
	}
	if !recursive {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_EMPTY, p, "delete: the directory is not empty (recursive is not set)")
	}
	done, err := s.Heavy(ctx, "delete", p)
	if err != nil {
		return nil, err
	}
	defer done()
	// Nothing is removed if anything beneath is protected, or if the tree
	// is deeper than the walk can go.
	if !judged {
		if err := s.judgeTree(ctx, "delete", p, d, base, ""); err != nil {
			return nil, err
		}
	}
	w := &walker{ctx: ctx, path: p, beforeOpen: s.beforeDescend}
	if err := w.removeAll(d.fd, base, 0); err != nil {
		e := fsError("delete", p, err)
		if w.removed > 0 {
			// The tree changed under the walk (it grew deeper, or an entry
			// could not be removed): say how much is gone.
			out := *e
			out.Message = fmt.Sprintf("%s (%d entries were removed before this)", e.Message, w.removed)
			return nil, &out
		}
		return nil, e
	}
	return &fsmcpv1.DeleteResponse{Removed: w.removed}, nil
}

// guardAside checks the guard on base in d, then (for a file, or a
// directory to be removed recursively) renames it to a fresh temp name,
// where no client can reach it, and checks again that it is what was
// checked; on a mismatch it is renamed back. It returns the name the
// delete then removes. An empty directory is removed in place: rmdir fails
// on anything added meanwhile.
//
// A crash between the rename and the removal leaves the entry under the
// temp name, which no tool shows and the next start sweeps: it is removed,
// as the call asked, having passed the first check.
func (s *Service) guardAside(ctx context.Context, g *guard, d *parent, base, p string, recursive bool) (string, error) {
	if err := g.check(ctx, s, d.fd, base, p, joinRel(d.rel, base)); err != nil {
		return "", err
	}
	if g.ifTree != "" && !recursive {
		return base, nil
	}
	tmp := tempName()
	if err := unix.Renameat2(d.fd, base, d.fd, tmp, unix.RENAME_NOREPLACE); err != nil {
		return "", fsError("delete", p, err)
	}
	if err := g.recheck(ctx, s, d.fd, tmp, p, joinRel(d.rel, base)); err != nil {
		if xerr := unix.Renameat2(d.fd, tmp, d.fd, base, unix.RENAME_NOREPLACE); xerr != nil {
			bug(fmt.Errorf("put back after a failed delete precondition: %w", xerr))
			return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, p, "delete: the path changed during the call and could not be restored")
		}
		return "", err
	}
	return tmp, nil
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
// names with the temp prefix, only regular files and directories (with
// everything in them) last modified before
// olderThan, never through a symlink. The worker sweeps in the background
// while it serves, with olderThan its start time, so a large tree does not
// delay start-up and the temp files of this process's own writes (created
// after it started) are never touched. On the way it shows the policy every
// regular file with more than one name (links.go). With remove unset
// (a read-only root) it only does the latter. It reports how many it
// removed and the first error it met.
func (s *Service) Sweep(olderThan time.Time, remove bool) (int, error) {
	// Derived protection first, so that the walk shows the other names of
	// the files it protects as well.
	s.refreshDerived("")
	f, err := s.root.Open(".")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sw := &sweeper{olderThan: olderThan.UnixNano(), remove: remove, note: s.note}
	sw.dir(int(f.Fd()), "", 0)
	return sw.removed, sw.err
}

type sweeper struct {
	olderThan int64
	remove    bool
	note      func(rel string, st *unix.Stat_t)
	removed   int
	err       error
}

func (sw *sweeper) fail(err error) {
	if sw.err == nil {
		sw.err = err
	}
}

func (sw *sweeper) dir(fd int, rel string, depth int) {
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
			sw.note(joinRel(rel, n), st)
			if sw.remove && isTempName(n) && st.Mtim.Nano() < sw.olderThan {
				if err := unix.Unlinkat(fd, n, 0); err != nil {
					sw.fail(err)
				} else {
					sw.removed++
				}
			}
		case unix.S_IFDIR:
			// A temp directory is a copy a crash interrupted (fs_copy
			// builds a tree under one): it goes whole.
			if isTempName(n) && st.Mtim.Nano() < sw.olderThan {
				if !sw.remove {
					continue
				}
				w := &walker{ctx: context.Background(), path: n}
				if err := w.removeAll(fd, n, depth); err != nil {
					sw.fail(err)
				} else {
					sw.removed++
				}
				continue
			}
			sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				sw.fail(err)
				continue
			}
			sw.dir(sub, joinRel(rel, n), depth+1)
			unix.Close(sub)
		}
	}
}

// sweepTemp runs Sweep for files older than start and logs the outcome; a
// failure to sweep does not stop the worker, it only leaves hidden files
// behind (or other names of protected files unknown to the policy).
func sweepTemp(s *Service, start time.Time, remove bool) {
	n, err := s.Sweep(start, remove)
	if n > 0 {
		fmt.Fprintf(os.Stderr, "fsmcp worker: removed %d temp files left by an earlier crash\n", n)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp worker: sweeping temp files: %v\n", err)
	}
}
