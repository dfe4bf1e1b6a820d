package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/dirwalk"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// maxWalkDepth bounds a recursive walk: each level holds one descriptor.
const maxWalkDepth = dirwalk.MaxDepth

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
		if st, err := fileio.Lstatat(d.fd, base); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && req.GetRecursive() {
			if err := s.judgeTree(ctx, "delete", p, d, base, ""); err != nil {
				return nil, err
			}
			judged = true
		}
		if name, err = s.guardAside(ctx, g, d, base, p, req.GetRecursive()); err != nil {
			return nil, err
		}
	}
	st, err := fileio.Lstatat(d.fd, name)
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
	done, err := s.heavy(ctx, "delete", p)
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
	w := &dirwalk.Remover{Ctx: ctx, BeforeOpen: s.beforeDescend}
	if err := w.RemoveAll(d.fd, base); err != nil {
		e := fsError("delete", p, err)
		if errors.Is(err, dirwalk.ErrTooDeep) {
			e = newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p, "delete: the tree is deeper than %d levels", maxWalkDepth)
		}
		if w.Removed > 0 {
			// The tree changed under the walk (it grew deeper, or an entry
			// could not be removed): say how much is gone.
			out := *e
			out.Message = fmt.Sprintf("%s (%d entries were removed before this)", e.Message, w.Removed)
			return nil, &out
		}
		return nil, e
	}
	return &fsmcpv1.DeleteResponse{Removed: w.Removed}, nil
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

// sweep removes temp files left by a crash anywhere under the root: only
// names with the temp prefix, only regular files and directories (with
// everything in them) last modified before
// olderThan, never through a symlink. The worker sweeps in the background
// while it serves, with olderThan its start time, so a large tree does not
// delay start-up and the temp files of this process's own writes (created
// after it started) are never touched. On the way it shows the policy every
// regular file with more than one name (links.go). With remove unset
// (a read-only root) it only does the latter. It reports how many it
// removed and the first error it met.
func (s *Service) sweep(olderThan time.Time, remove bool) (int, error) {
	// Derived protection first, so that the walk shows the other names of
	// the files it protects as well.
	s.refreshDerived("")
	f, err := s.root.Open(".")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sw := &sweeper{olderThan: olderThan.UnixNano(), remove: remove, note: s.note}
	w := &dirwalk.Walker{Visit: sw.visit, Fail: func(_ string, err error) error {
		sw.fail(err)
		return nil
	}}
	w.Walk(int(f.Fd()), "")
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

// visit sweeps the entry e of the directory fd, at rel, and reports
// whether to walk into it.
func (sw *sweeper) visit(fd int, e fs.DirEntry, rel string) (bool, error) {
	n := e.Name()
	st, err := fileio.Lstatat(fd, n)
	if err != nil {
		return false, nil // gone since readdir
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		sw.note(rel, st)
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
		if !isTempName(n) || st.Mtim.Nano() >= sw.olderThan {
			return true, nil
		}
		if sw.remove {
			if err := (&dirwalk.Remover{Ctx: context.Background()}).RemoveAll(fd, n); err != nil {
				sw.fail(err)
			} else {
				sw.removed++
			}
		}
	}
	return false, nil
}

// sweepTemp runs sweep for files older than start and logs the outcome; a
// failure to sweep does not stop the worker, it only leaves hidden files
// behind (or other names of protected files unknown to the policy).
func sweepTemp(s *Service, start time.Time, remove bool) {
	n, err := s.sweep(start, remove)
	if n > 0 {
		fmt.Fprintf(os.Stderr, "fsmcp worker: removed %d temp files left by an earlier crash\n", n)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp worker: sweeping temp files: %v\n", err)
	}
}
