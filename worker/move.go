package worker

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
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
	p, err := cleanPath(req.GetPath())
	if err != nil {
		return nil, err
	}
	if isTempName(path.Base(p)) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "mkdir: names starting with %s are reserved for fsmcp's temp files", tempPrefix)
	}
	// Create one component at a time, as the client spelled the path:
	// each prefix is resolved by the Root exactly as the final path will
	// be ("x/../b" is "b"), so only what this call really creates gets
	// newDirMode, and a directory reached through ".." keeps its mode.
	made := map[[2]uint64]bool{} // (dev, inode) of each directory this call created
	comps := strings.Split(p, "/")
	for i, c := range comps {
		if c == "" || c == "." || c == ".." {
			continue
		}
		q := strings.Join(comps[:i+1], "/")
		switch err := s.root.Mkdir(q, newDirMode); {
		case err == nil:
			if st, err := s.lstat(q); err == nil {
				made[[2]uint64{uint64(st.Dev), st.Ino}] = true
			}
			if err := s.chmodNewDir(q); err != nil {
				return nil, err
			}
		case errors.Is(err, fs.ErrExist):
			// Whatever is there and not a directory (a file, a symlink to
			// a file, a dangling symlink) is in the way.
			st, serr := s.root.Stat(q)
			if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
				return nil, fsError("mkdir", p, serr) // e.g. a symlink leaving the root
			}
			if serr != nil || !st.IsDir() {
				if i == len(comps)-1 || strings.Trim(strings.Join(comps[i+1:], ""), "/.") == "" {
					return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, p, "mkdir: something other than a directory exists at the path")
				}
				return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY, p, "mkdir: a component of the path is not a directory")
			}
		default:
			return nil, fsError("mkdir", p, err)
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

// chmodNewDir gives the directory this call just created at q newDirMode,
// whatever the umask took. O_NOFOLLOW: if a symlink took its place, leave
// whatever it points to alone.
func (s *Service) chmodNewDir(q string) error {
	d, err := s.root.OpenFile(q, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer d.Close()
	if err := d.Chmod(newDirMode); err != nil {
		return fsError("chmod", q, err)
	}
	return nil
}

// Move implements fsmcpv1.WorkerServiceServer. It renames with
// renameat2(RENAME_NOREPLACE) between the two parent directories, each
// opened through the Root, so an existing destination is never replaced
// and neither final component is followed.
func (s *Service) Move(ctx context.Context, req *fsmcpv1.MoveRequest) (*fsmcpv1.MoveResponse, error) {
	from, err := cleanPath(req.GetFrom())
	if err != nil {
		return nil, err
	}
	to, err := cleanPath(req.GetTo())
	if err != nil {
		return nil, err
	}
	if from == "." {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, from, "move: the root cannot be moved")
	}
	if to == "." {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, to, "move: the destination is the root")
	}
	fd, fbase, err := s.openParent("move", from)
	if err != nil {
		return nil, err
	}
	defer fd.close()
	td, tbase, err := s.openParent("move", to)
	if err != nil {
		return nil, err
	}
	defer td.close()
	st, err := fstatat(fd.fd, fbase)
	if err != nil {
		return nil, fsError("move", from, err)
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
