package worker

import (
	"context"
	"encoding/hex"
	"os"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// guard is the optional precondition of a delete or move: if_sha256 for a
// file, if_tree_sha256 for a directory. It is checked on the entry in
// place, and again on the inode the operation then acts on, so what is
// removed or moved is what the client described, not something swapped in
// between.
//
// It does not prevent a writer that holds the file open from changing its
// bytes after the last check; such a writer is outside what any name-based
// check can see.
type guard struct {
	ifSHA, ifTree string
	// f is the file that was hashed, held open so that its identity and
	// mtime can be compared after the rename.
	f  *os.File
	st *unix.Stat_t
}

func newGuard(p, ifSHA, ifTree string) (*guard, error) {
	for _, h := range []string{ifSHA, ifTree} {
		if h != "" && !isSHA256Hex(h) {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "if_sha256 and if_tree_sha256 must be 64 lowercase hex digits")
		}
	}
	if ifSHA != "" && ifTree != "" {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "give if_sha256 (a file) or if_tree_sha256 (a directory), not both")
	}
	if ifSHA == "" && ifTree == "" {
		return nil, nil
	}
	return &guard{ifSHA: ifSHA, ifTree: ifTree}, nil
}

func (g *guard) close() {
	if g != nil && g.f != nil {
		g.f.Close()
	}
}

// check verifies the entry name in the directory fd (client path p, real
// root-relative path rel). A file's hash is its content's, so a denied
// file is refused, as is a tree holding one.
func (g *guard) check(ctx context.Context, s *Service, fd int, name, p, rel string) error {
	st, err := fileio.Lstatat(fd, name)
	if err != nil {
		return fsError("check", p, err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if g.ifSHA != "" {
		if isDir || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "if_sha256 names a file's content, but the path is a %s", typeName(st))
		}
		if err := s.judge(ctx, "check", p, rel, accessContent); err != nil {
			return err
		}
		ffd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return fsError("check", p, err)
		}
		f := os.NewFile(uintptr(ffd), name)
		opened, err := fstat(f)
		if err == nil {
			err = regularOnly("check", p, opened)
		}
		var sum string
		if err == nil {
			sum, err = s.hashOpen(ctx, f, opened)
		}
		if err != nil {
			f.Close()
			return fsError("check", p, err)
		}
		if g.f != nil {
			g.f.Close()
		}
		g.f, g.st = f, opened
		if sum != g.ifSHA {
			e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the file's sha256 is not if_sha256")
			e.CurrentSHA256 = sum
			return e
		}
		return nil
	}
	if !isDir {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "if_tree_sha256 names a directory's tree, but the path is a %s", typeName(st))
	}
	dg := &digester{s: s, ctx: ctx}
	sum, _, err := dg.node(fd, name, p, rel, 0)
	if err != nil {
		return fsError("check", p, err)
	}
	if got := hex.EncodeToString(sum[:]); got != g.ifTree {
		e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the directory's tree_sha256 is not if_tree_sha256 (current_sha256 holds its tree digest)")
		e.CurrentSHA256 = got
		return e
	}
	return nil
}

// recheck verifies, after a rename put the entry at name in fd, that it is
// still what check saw: for a file the same inode, not written since (the
// rename changed its ctime, so mtime and size tell); for a directory, the
// same tree digest.
func (g *guard) recheck(ctx context.Context, s *Service, fd int, name, p, rel string) error {
	if g.ifTree != "" {
		return g.check(ctx, s, fd, name, p, rel)
	}
	st, err := fileio.Lstatat(fd, name)
	if err != nil {
		return fsError("check", p, err)
	}
	now, err := fstat(g.f)
	if err != nil {
		return fsError("check", p, err)
	}
	if !sameInode(st, g.st) || now.Mtim != g.st.Mtim || now.Size != g.st.Size {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the file changed during the call; nothing was done")
	}
	return nil
}

func typeName(st *unix.Stat_t) string {
	switch fileType(st.Mode) {
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		return "directory"
	case fsmcpv1.FileType_FILE_TYPE_SYMLINK:
		return "symlink"
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		return "file"
	}
	return "special file"
}
