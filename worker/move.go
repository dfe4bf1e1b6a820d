package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// newDirMode is the mode of a directory fs_mkdir creates. It is set with
// fchmod, so the worker's umask never changes it.
const newDirMode = 0o755

// Mkdir implements fsmcpv1.WorkerServiceServer. It creates the directory
// and any missing parents through the Root; an existing directory is
// success, anything else already at the path is already_exists.
func (s *Service) Mkdir(ctx context.Context, req *fsmcpv1.MkdirRequest) (*fsmcpv1.MkdirResponse, error) {
	p, err := clientPath(req.GetPath())
	if err != nil {
		return nil, err
	}
	unlock := s.lockRenames(false)
	defer unlock()
	// Create one component at a time, as the client spelled the path:
	// each prefix is resolved by the Root exactly as the final path will
	// be ("x/../b" is "b"), so only what this call really creates gets
	// newDirMode, and a directory reached through ".." keeps its mode.
	// Each component it creates is judged as a mutation of its real path
	// (no temp name, nothing protected) before it is made in its
	// parent's descriptor.
	comps := strings.Split(p, "/")
	if err := s.judgeMkdir(p, comps); err != nil {
		return nil, err
	}
	made := map[[2]uint64]bool{} // (dev, inode) of each directory this call created
	for i, c := range comps {
		if c == "" || c == "." || c == ".." {
			continue
		}
		// The parent as spelled, never cleaned: through a symlink, "x/.."
		// need not be the directory that holds x.
		dir := strings.Join(comps[:i], "/")
		if dir == "" {
			dir = "."
		}
		d, err := s.openDir("mkdir", p, dir)
		if err != nil {
			return nil, err
		}
		created, err := s.mkdirOne(p, d, c, i == len(comps)-1 || strings.Trim(strings.Join(comps[i+1:], ""), "/.") == "")
		if err == nil && created != nil {
			made[[2]uint64{uint64(created.Dev), created.Ino}] = true
		}
		d.close()
		if err != nil {
			return nil, err
		}
	}
	// Created: the directory the whole path names is one this call made
	// (with "..", that need not be the last one it made).
	created := false
	if fi, err := s.root.Stat(p); err == nil {
		st := toStat(fi)
		created = made[[2]uint64{uint64(st.Dev), st.Ino}]
	}
	return &fsmcpv1.MkdirResponse{Created: created}, nil
}

// judgeMkdir judges, before any is made, every directory that Mkdir of
// comps would create: those that exist are resolved by their real path,
// and below the first that does not, each new directory's path follows
// lexically (a directory just made is no symlink, so ".." below it is
// its parent). Errors other than the policy's are left to the creation,
// which meets them in the same order.
func (s *Service) judgeMkdir(p string, comps []string) error {
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
		if err := s.judge("mkdir", p, strings.Join(stack, "/"), accessMutate); err != nil {
			return err
		}
	}
	return nil
}

// mkdirOne makes the directory name in d unless one is there, and returns
// the lstat of the one it made (nil if it existed). last says name is
// the path's final directory, for the error when something else is in
// the way.
func (s *Service) mkdirOne(p string, d *parent, name string, last bool) (*unix.Stat_t, error) {
	st, err := fstatat(d.fd, name)
	if err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil, nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// Follow a symlink as the Root would: to a directory inside
			// the root is a directory; outside it, outside_root.
			fi, serr := s.root.Stat(d.dir + "/" + name)
			if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
				return nil, fsError("mkdir", p, serr)
			}
			if serr == nil && fi.IsDir() {
				return nil, nil
			}
		}
		if last {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, p, "mkdir: something other than a directory exists at the path")
		}
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY, p, "mkdir: a component of the path is not a directory")
	}
	if !errors.Is(err, unix.ENOENT) {
		return nil, fsError("mkdir", p, err)
	}
	if err := s.judge("mkdir", p, joinRel(d.rel, name), accessMutate); err != nil {
		return nil, err
	}
	if err := unix.Mkdirat(d.fd, name, newDirMode); err != nil {
		if errors.Is(err, unix.EEXIST) {
			// Made meanwhile by someone else: judge it as found.
			return s.mkdirOne(p, d, name, last)
		}
		return nil, fsError("mkdir", p, err)
	}
	// Give it newDirMode whatever the umask took. O_NOFOLLOW: if a
	// symlink took its place, leave whatever it points to alone.
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, newDirMode); err != nil {
		return nil, fsError("chmod", p, err)
	}
	var made unix.Stat_t
	if err := unix.Fstat(fd, &made); err != nil {
		return nil, nil
	}
	return &made, nil
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
	fd, fbase, err := s.openName("move", from, accessMutate)
	if err != nil {
		return nil, err
	}
	defer fd.close()
	td, tbase, err := s.openName("move", to, accessMutate)
	if err != nil {
		return nil, err
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
	st, err := fstatat(fd.fd, fbase)
	if err != nil {
		return nil, fsError("move", from, err)
	}
	fromRel, toRel := joinRel(fd.rel, fbase), joinRel(td.rel, tbase)
	if err := s.judgeCarry("move", from, fromRel, toRel); err != nil {
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
		err = renameNoReplace(fd.fd, fbase, td.fd, tbase)
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
