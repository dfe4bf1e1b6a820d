package worker

import (
	"context"
	"errors"
	"os"
	"path"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/dirwalk"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// Copy implements fsmcpv1.WorkerServiceServer. It copies a regular file,
// or with recursive a directory tree, to a path that must not exist. The
// copy is built under a fresh temp name beside to (a directory whole,
// with every file and subdirectory inside it), with the metadata fs_write
// keeps (mode, owner, extended attributes and ACLs, inode flags) read back
// and compared, then put in place with RENAME_NOREPLACE: to appears whole
// or not at all, and is never replaced. File content goes file to file
// (FICLONE, copy_file_range, or a buffer; see fileio.CopyRange).
//
// It does not copy symlinks, fifos, sockets or devices: a tree holding one
// is refused with unsupported and nothing appears at to. The worker never
// creates symlinks (its seccomp filter refuses symlinkat), and a relative
// symlink copied to another depth would point somewhere else, possibly out
// of the root. Hard links inside the tree become separate files.
func (s *Service) Copy(ctx context.Context, req *fsmcpv1.CopyRequest) (*fsmcpv1.CopyResponse, error) {
	from, err := clientPath(req.GetFrom())
	if err != nil {
		return nil, err
	}
	to, err := clientPath(req.GetTo())
	if err != nil {
		return nil, err
	}
	if from == "." {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, from, "copy: the root cannot be copied into itself")
	}
	if to == "." {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, to, "copy: the destination is the root")
	}
	done, err := s.heavy(ctx, "copy", to)
	if err != nil {
		return nil, err
	}
	defer done()
	// Shared: the copy renames only its own new temp name into place.
	unlockRenames := s.lockRenames(false)
	defer unlockRenames()
	// from is read (accessContent: a denied file is never copied); to is
	// created (accessMutate: never a protected or temp name).
	fd, fbase, err := s.openName(ctx, "copy", from, accessContent)
	if err != nil {
		return nil, err
	}
	defer fd.close()
	td, tbase, err := s.openName(ctx, "copy", to, accessMutate)
	if err != nil {
		return nil, missingDirectory(err, to)
	}
	defer td.close()
	unlock, err := s.locks.lock(ctx, lockKey{td.st.Dev, td.st.Ino, tbase})
	if err != nil {
		return nil, fsError("copy", to, err)
	}
	defer unlock()
	if _, err := fileio.Lstatat(td.fd, tbase); err == nil {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, to, "copy: the destination exists")
	} else if !errors.Is(err, unix.ENOENT) {
		return nil, fsError("copy", to, err)
	}
	st, err := fileio.Lstatat(fd.fd, fbase)
	if err != nil {
		return nil, fsError("copy", from, err)
	}
	fromRel, toRel := joinRel(fd.rel, fbase), joinRel(td.rel, tbase)
	c := &copier{ctx: ctx, s: s}
	tmp := tempName()
	switch fileType(st.Mode) {
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		if err := s.judgeCarry(ctx, "copy", from, fromRel, toRel); err != nil {
			return nil, err
		}
		err = c.file(fd.fd, fbase, from, fromRel, td.fd, tmp)
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		if !req.GetRecursive() {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_IS_A_DIRECTORY, from, "copy: from is a directory (set recursive)")
		}
		inside, werr := s.within(td, st)
		if werr != nil {
			return nil, fsError("copy", to, werr)
		}
		if inside {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, to, "copy: a directory cannot be copied into itself")
		}
		// Nothing is copied if anything beneath is protected, would
		// become protected, or is denied.
		if err := s.judgeTree(ctx, "copy", from, fd, fbase, toRel); err != nil {
			return nil, err
		}
		err = c.dir(fd.fd, fbase, from, fromRel, td.fd, tmp, 0)
	default:
		return nil, c.unsupported(from, st)
	}
	if err != nil {
		(&dirwalk.Remover{Ctx: context.WithoutCancel(ctx)}).RemoveAll(td.fd, tmp)
		unix.Unlinkat(td.fd, tmp, 0)
		return nil, fsError("copy", from, err)
	}
	if err := fileio.RenameNoReplace(td.fd, tmp, td.fd, tbase); err != nil {
		(&dirwalk.Remover{Ctx: context.WithoutCancel(ctx)}).RemoveAll(td.fd, tmp)
		unix.Unlinkat(td.fd, tmp, 0)
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, to, "copy: the destination was created meanwhile; nothing was copied")
		}
		return nil, fsError("copy", to, err)
	}
	if err := unix.Fsync(td.fd); err != nil {
		return nil, fsError("fsync directory", to, err)
	}
	return &fsmcpv1.CopyResponse{Files: c.files, Directories: c.dirs, Bytes: c.bytes}, nil
}

// copier copies one file or tree and counts what it copied.
type copier struct {
	ctx                context.Context
	s                  *Service
	files, dirs, bytes int64
}

func (c *copier) unsupported(p string, st *unix.Stat_t) error {
	return newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, p,
		"copy: fsmcp copies regular files and directories only; this is a %s (nothing was copied)", typeName(st))
}

// file copies the regular file name of sfd (client path p, real path rel)
// to a new file dname in dfd. A denied file is refused.
func (c *copier) file(sfd int, name, p, rel string, dfd int, dname string) error {
	if err := c.s.judge(c.ctx, "copy", p, rel, accessContent); err != nil {
		return err
	}
	fd, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_REGULAR, p, "copy: not a regular file")
	}
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(fd), name)
	defer src.Close()
	before, err := fstat(src)
	if err != nil {
		return err
	}
	if err := regularOnly("copy", p, before); err != nil {
		return err
	}
	dst, err := openNew(dfd, dname)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := copyFlags(p, src, dst); err != nil {
		return err
	}
	if before.Size > 0 && unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) != nil {
		if err := fileio.CopyRange(c.ctx, src, dst, 0, 0, before.Size); err != nil {
			return err
		}
	}
	if err := copyMetadata(p, src, dst); err != nil {
		return err
	}
	// A file written while it was copied would be copied half old, half
	// new: refuse it.
	after, err := fstat(src)
	if err != nil {
		return err
	}
	if after.Mtim != before.Mtim || after.Ctim != before.Ctim || after.Size != before.Size {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "copy: the file changed while it was copied; nothing was copied")
	}
	if err := dst.Sync(); err != nil {
		return err
	}
	c.files++
	c.bytes += before.Size
	return nil
}

// openNew creates the file name in dirfd, which must not exist, readable by
// its owner only until its metadata is set.
func openNew(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// dir copies the directory name of sfd (client path p, real path rel) to a new directory
// dname in dfd: its entries first, in a directory only the worker may
// enter, then its metadata, so that a read-only directory can still be
// filled.
func (c *copier) dir(sfd int, name, p, rel string, dfd int, dname string, depth int) error {
	if depth > maxWalkDepth {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p, "copy: the tree is deeper than %d levels", maxWalkDepth)
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	fd, err := dirwalk.Open(sfd, name)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(fd), name)
	defer src.Close()
	if err := unix.Mkdirat(dfd, dname, 0o700); err != nil {
		return err
	}
	nfd, err := unix.Openat(dfd, dname, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(nfd), dname)
	defer dst.Close()
	names, err := dirwalk.Names(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		if isTempName(n) {
			continue
		}
		child := path.Join(p, n)
		st, err := fileio.Lstatat(fd, n)
		if errors.Is(err, unix.ENOENT) {
			continue // removed since readdir: it is not part of the copy
		}
		if err != nil {
			return err
		}
		switch fileType(st.Mode) {
		case fsmcpv1.FileType_FILE_TYPE_FILE:
			err = c.file(fd, n, child, joinRel(rel, n), nfd, n)
		case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
			err = c.dir(fd, n, child, joinRel(rel, n), nfd, n, depth+1)
		default:
			err = c.unsupported(child, st)
		}
		if err != nil {
			return err
		}
	}
	if err := copyMetadata(p, src, dst); err != nil {
		return err
	}
	if err := dst.Sync(); err != nil {
		return err
	}
	c.dirs++
	return nil
}
