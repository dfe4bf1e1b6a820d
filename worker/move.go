package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// newDirMode is the mode of a directory fs_mkdir creates. It is set with
// fchmod, so the worker's umask never changes it.
const newDirMode = 0o755

// Mkdir implements fsmcpv1.WorkerServiceServer. It creates the directory
// and any missing parents; an existing directory is success, anything else
// already at the path is already_exists.
//
// It walks the path once, as the client spelled it, one component at a
// time, each relative to the descriptor of the one before (so a path of
// depth n costs n steps, not n²): a plain name is made with mkdirat and
// opened O_NOFOLLOW; ".." returns to the descriptor it came from; a
// component that is a symlink is resolved, with the whole prefix, by the
// Root, exactly as every other tool resolves it, and so is a ".." after
// one ("x/../b" is "b"; through a symlink "x/.." need not be the directory
// that holds x). Only what this call creates gets newDirMode; each
// component it creates is judged as a mutation of its real path (no temp
// name, nothing protected) before it is made. A path deeper than
// maxWalkDepth is too_large before anything is made: no recursive delete
// could remove what it would create.
func (s *Service) Mkdir(ctx context.Context, req *fsmcpv1.MkdirRequest) (*fsmcpv1.MkdirResponse, error) {
	p, err := clientPath(req.GetPath())
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(p, "/") {
		// Still absolute after clientPath's one "/": as the Root refuses it.
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT, p, "mkdir: path leaves the root")
	}
	comps := strings.Split(p, "/")
	depth, last := 0, -1
	for i, c := range comps {
		if c != "" && c != "." {
			depth, last = depth+1, i
		}
	}
	if depth > maxWalkDepth {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p, "mkdir: the path has %d components, over the limit of %d; nothing was created", depth, maxWalkDepth)
	}
	done, err := s.heavy(ctx, "mkdir", p)
	if err != nil {
		return nil, err
	}
	defer done()
	unlock := s.lockRenames(false)
	defer unlock()
	// Every directory this call would create is judged before any is
	// made, and with --rules the path as Check resolves it, under the
	// same lock as the creation.
	if err := s.judgeMkdir(ctx, p, comps); err != nil {
		return nil, err
	}
	if s.rules != nil {
		rels, err := s.checkPaths(p)
		if err != nil {
			return nil, err
		}
		for _, rel := range rels {
			if err := s.judgeRules(ctx, "mkdir", p, rel); err != nil {
				return nil, err
			}
		}
	}
	top, err := s.root.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fsError("mkdir", p, err)
	}
	w := &mkdirWalk{stack: []*os.File{top}, anchored: true}
	defer w.close()
	made := map[[2]uint64]bool{} // (dev, inode) of each directory this call created
	for i, c := range comps {
		if err := ctx.Err(); err != nil {
			return nil, fsError("mkdir", p, err)
		}
		q := strings.Join(comps[:i+1], "/")
		switch c {
		case "", ".":
			continue
		case "..":
			if err := w.up(s, p, q); err != nil {
				return nil, fsError("mkdir", p, err)
			}
			continue
		}
		f, st, err := s.mkdirOne(ctx, p, q, w.top(), c, i == last)
		if err != nil {
			return nil, err
		}
		if st != nil {
			made[[2]uint64{uint64(st.Dev), st.Ino}] = true
		}
		if f == nil {
			// A symlink: the Root resolves the prefix as spelled.
			if f, err = s.root.OpenFile(q, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0); err != nil {
				return nil, s.inTheWay(p, q, i == last, err)
			}
			w.reset(f)
			continue
		}
		w.push(f)
	}
	// Created: the directory the whole path names is one this call made
	// (with "..", that need not be the last one it made).
	created := false
	var st unix.Stat_t
	if unix.Fstat(int(w.top().Fd()), &st) == nil {
		created = made[[2]uint64{uint64(st.Dev), st.Ino}]
	}
	return &fsmcpv1.MkdirResponse{Created: created}, nil
}

// mkdirOne makes the directory name in dir unless one is there, and opens
// it (O_NOFOLLOW); it returns the lstat of the one it made (nil if it
// existed). A symlink in the way is returned as a nil file, for the Root
// to follow; anything else in the way is refused. q is the path as
// spelled up to name; last says name is the path's final directory.
func (s *Service) mkdirOne(ctx context.Context, p, q string, dir *os.File, name string, last bool) (*os.File, *unix.Stat_t, error) {
	dfd := int(dir.Fd())
	var made *unix.Stat_t
	st, err := fileio.Lstatat(dfd, name)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return nil, nil, nil
	case err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, nil, s.inTheWay(p, q, last, unix.ENOTDIR)
	case err != nil && !errors.Is(err, unix.ENOENT):
		return nil, nil, fsError("mkdir", p, err)
	case err != nil:
		rel, err := s.realPath("mkdir", p, dfd)
		if err != nil {
			return nil, nil, err
		}
		if err := s.judge(ctx, "mkdir", p, joinRel(rel, name), accessMutate); err != nil {
			return nil, nil, err
		}
		err = unix.Mkdirat(dfd, name, newDirMode)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, nil, fsError("mkdir", p, err)
		}
		if err == nil {
			made = &unix.Stat_t{}
		}
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, nil, nil // made or swapped into a symlink meanwhile
	case err != nil:
		return nil, nil, s.inTheWay(p, q, last, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if made != nil {
		// Give it newDirMode whatever the umask took.
		if err := unix.Fstat(fd, made); err != nil {
			made = nil
		} else if err := unix.Fchmod(fd, newDirMode); err != nil {
			f.Close()
			return nil, nil, fsError("chmod", p, err)
		}
	}
	return f, made, nil
}

// inTheWay answers a component q of p that is not a directory: outside
// the root, or something else in the way (already_exists for the final
// one, not_a_directory before it).
func (s *Service) inTheWay(p, q string, last bool, err error) error {
	switch {
	case link.IsEscape(err):
		return fsError("mkdir", p, err)
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENOENT), errors.Is(err, fs.ErrNotExist):
		if last {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, p, "mkdir: something other than a directory exists at the path")
		}
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY, p, "mkdir: a component of the path is not a directory")
	}
	return fsError("mkdir", p, err)
}

// judgeMkdir judges, before any is made, every directory that Mkdir of
// comps would create: those that exist are resolved by their real path,
// and below the first that does not, each new directory's path follows
// lexically (a directory just made is no symlink, so ".." below it is
// its parent). Errors other than the policy's are left to the creation,
// which meets them in the same order.
func (s *Service) judgeMkdir(ctx context.Context, p string, comps []string) error {
	rel, exists := "", true
	var stack []string
	for i, c := range comps {
		if c == "" || c == "." {
			continue
		}
		if exists {
			d, err := s.openDir("mkdir", p, strings.Join(comps[:i+1], "/"))
			if err == nil {
				rel = d.rel
				d.close()
				continue
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND || c == ".." {
				return nil
			}
			exists = false
			if rel != "" {
				stack = strings.Split(rel, "/")
			}
		}
		if c == ".." {
			if len(stack) == 0 {
				return nil // leaves the root: the creation refuses it
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, c)
		if err := s.judge(ctx, "mkdir", p, strings.Join(stack, "/"), accessMutate); err != nil {
			return err
		}
	}
	return nil
}

// mkdirWalk is the chain of directory descriptors a Mkdir has walked.
// While anchored, stack[0] is the root and each entry is a plain child of
// the one below it.
type mkdirWalk struct {
	stack    []*os.File
	anchored bool
}

func (w *mkdirWalk) top() *os.File   { return w.stack[len(w.stack)-1] }
func (w *mkdirWalk) push(f *os.File) { w.stack = append(w.stack, f) }

func (w *mkdirWalk) close() {
	for _, f := range w.stack {
		f.Close()
	}
}

// reset makes f, reached through the Root, the only descriptor: the
// lineage of the ones before it no longer tells what ".." is.
func (w *mkdirWalk) reset(f *os.File) {
	w.close()
	w.stack, w.anchored = []*os.File{f}, false
}

// up handles the ".." ending prefix q of p: back to the descriptor below;
// above the root is outside_root; after a symlink the Root resolves q.
func (w *mkdirWalk) up(s *Service, p, q string) error {
	switch {
	case len(w.stack) > 1:
		w.top().Close()
		w.stack = w.stack[:len(w.stack)-1]
		return nil
	case w.anchored:
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT, p, "mkdir: path leaves the root")
	}
	f, err := s.root.OpenFile(q, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	w.reset(f)
	return nil
}

// Move implements fsmcpv1.WorkerServiceServer. It renames with
// renameat2(RENAME_NOREPLACE) between the two parent directories, each
// opened through the Root, so an existing destination is never replaced
// and neither final component is followed.
func (s *Service) Move(ctx context.Context, req *fsmcpv1.MoveRequest) (*fsmcpv1.MoveResponse, error) {
	from, err := clientPath(req.GetFrom())
	if err != nil {
		return nil, err
	}
	to, err := clientPath(req.GetTo())
	if err != nil {
		return nil, err
	}
	if from == "." {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, from, "move: the root cannot be moved")
	}
	if to == "." {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, to, "move: the destination is the root")
	}
	g, err := newGuard(from, req.GetIfSha256(), req.GetIfTreeSha256())
	if err != nil {
		return nil, err
	}
	defer g.close()
	// Exclusively: moving a directory changes the real path of all
	// beneath it, which no other mutation's judgement may straddle.
	unlock := s.lockRenames(true)
	defer unlock()
	fd, fbase, err := s.openName(ctx, "move", from, accessMutate)
	if err != nil {
		return nil, err
	}
	defer fd.close()
	td, tbase, err := s.openName(ctx, "move", to, accessMutate)
	if err != nil {
		return nil, missingDirectory(err, to)
	}
	defer td.close()
	if g != nil {
		unlock, err := s.locks.lock(ctx, lockKey{fd.st.Dev, fd.st.Ino, fbase})
		if err != nil {
			return nil, fsError("move", from, err)
		}
		defer unlock()
		if err := g.check(ctx, s, fd.fd, fbase, from, joinRel(fd.rel, fbase)); err != nil {
			return nil, err
		}
	}
	st, err := fileio.Lstatat(fd.fd, fbase)
	if err != nil {
		return nil, fsError("move", from, err)
	}
	fromRel, toRel := joinRel(fd.rel, fbase), joinRel(td.rel, tbase)
	if err := s.judgeCarry(ctx, "move", from, fromRel, toRel); err != nil {
		return nil, err
	}
	switch fileType(st.Mode) {
	case fsmcpv1.FileType_FILE_TYPE_FIFO, fsmcpv1.FileType_FILE_TYPE_SOCKET, fsmcpv1.FileType_FILE_TYPE_DEVICE, fsmcpv1.FileType_FILE_TYPE_OTHER:
		// Landlock counts a rename as making a name of the file's type,
		// and the worker is not allowed to make these.
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, from, "move: fsmcp does not rename fifos, sockets or devices")
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		inside, err := s.within(td, st)
		if err != nil {
			return nil, fsError("move", to, err)
		}
		if inside {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, to, "move: a directory cannot move into itself")
		}
		// Nothing moves if anything beneath is protected, would become
		// protected, or is denied and would not be.
		if err := s.judgeTree(ctx, "move", from, fd, fbase, toRel); err != nil {
			return nil, err
		}
	}
	err = unix.Renameat2(fd.fd, fbase, td.fd, tbase, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		// A filesystem without RENAME_NOREPLACE: link then unlink.
		err = fileio.RenameNoReplace(fd.fd, fbase, td.fd, tbase)
	}
	switch {
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, to, "move: the destination exists")
	case errors.Is(err, unix.EXDEV):
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, to,
			"move: from and to are on different filesystems; fsmcp never copies instead of renaming")
	case errors.Is(err, unix.EINVAL):
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, to, "move: the kernel refuses this rename (a directory into itself?)")
	case err != nil:
		return nil, fsError("move", from, err)
	}
	// A guarded move checks that what arrived is what was checked, and
	// otherwise moves it back.
	if g != nil {
		if err := g.recheck(ctx, s, td.fd, tbase, from, joinRel(fd.rel, fbase)); err != nil {
			if xerr := unix.Renameat2(td.fd, tbase, fd.fd, fbase, unix.RENAME_NOREPLACE); xerr != nil {
				bug(fmt.Errorf("move back after a failed move precondition: %w", xerr))
				return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, to, "move: the path changed during the call and could not be moved back")
			}
			return nil, err
		}
	}
	// Make both directory entries durable.
	unix.Fsync(td.fd)
	if !sameInode(&fd.st, &td.st) {
		unix.Fsync(fd.fd)
	}
	return &fsmcpv1.MoveResponse{}, nil
}

// within reports whether the directory d is dir itself or lies below it,
// by walking up from d through ".." until the root. The walk only stats
// O_PATH descriptors; the kernel refuses the rename anyway, this gives
// the clear answer.
func (s *Service) within(d *parent, dir *unix.Stat_t) (bool, error) {
	cur, err := unix.Openat(d.fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer func() { unix.Close(cur) }()
	for range 4096 {
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return false, err
		}
		if sameInode(&st, dir) {
			return true, nil
		}
		if s.isRoot(&st) {
			return false, nil
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil {
			unix.Close(up)
			return false, err
		}
		unix.Close(cur)
		cur = up
		if sameInode(&ust, &st) {
			return false, nil // the filesystem's top: the root was not passed
		}
	}
	return false, nil
}
