package worker

import (
	"context"
	"errors"
	"fmt"
	"os"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// keepDisplaced moves the file a commit displaced (now under tmp in d,
// hashing to oldSHA) into the quarantine and returns its token. newFile is
// the file the commit put at base (hashing to newSHA), which an undo must
// find unchanged. If the quarantine cannot
// take it, the commit is reversed (the old file back at base, the new one
// under tmp for the caller to remove) and the write fails: with a
// quarantine, nothing is replaced that could not be restored.
func (s *Service) keepDisplaced(d *parent, tmp, base, p string, newFile *os.File, oldSHA, newSHA string) (string, error) {
	st, err := fstat(newFile)
	if err == nil {
		var token string
		token, _, err = s.quarantine.keep(d.fd, tmp, &qEntry{path: joinRel(d.rel, base), parentDev: d.st.Dev, parentIno: d.st.Ino,
			base: base, displaced: true, now: idOf(st), nowSHA: newSHA, keptSHA: oldSHA})
		if err == nil {
			return token, nil
		}
	}
	if xerr := unix.Renameat2(d.fd, tmp, d.fd, base, unix.RENAME_EXCHANGE); xerr != nil {
		bug(fmt.Errorf("exchange back after the quarantine refused the old file: %w", xerr))
		return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, p, "the old file could not be quarantined nor put back")
	}
	unix.Fsync(d.fd)
	return "", fsError("quarantine", p, err)
}

// quarantinable reports whether a deleted entry of this type goes into the
// quarantine: files, directories and symlinks do; fifos, sockets and
// devices hold no data and are unlinked.
func quarantinable(st *unix.Stat_t) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR, unix.S_IFLNK:
		return true
	}
	return false
}

// deleteToQuarantine is Delete with a quarantine: the entry now called
// name in d (base, unless a guard renamed it aside) is renamed into it,
// a whole directory tree at once after judging every name beneath it
// (unless judged already). The caller holds s.renames exclusively: taking
// a directory out of the root is a directory move. If it cannot be kept,
// an entry renamed aside goes back to base and the delete fails.
func (s *Service) deleteToQuarantine(ctx context.Context, d *parent, name, base, p string, st *unix.Stat_t, recursive, judged bool) (resp *fsmcpv1.DeleteResponse, err error) {
	if name != base {
		defer func() {
			if err != nil {
				if xerr := renameNoReplace(d.fd, name, d.fd, base); xerr != nil {
					bug(fmt.Errorf("put back after a failed quarantine: %w", xerr))
				}
			}
		}()
	}
	if !s.quarantine.sameFS(st.Dev) || !s.quarantine.sameFS(d.st.Dev) {
		return nil, errOtherFS("delete", p)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		empty, err := isEmptyDir(d.fd, name)
		if err != nil {
			return nil, fsError("delete", p, err)
		}
		if !empty && !recursive {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_EMPTY, p, "delete: the directory is not empty (recursive is not set)")
		}
		// Nothing is removed if anything beneath is protected.
		if !judged {
			if err := s.judgeTree(ctx, "delete", p, d, name, ""); err != nil {
				return nil, err
			}
		}
	}
	token, n, err := s.quarantine.keep(d.fd, name, &qEntry{path: joinRel(d.rel, base), parentDev: d.st.Dev, parentIno: d.st.Ino, base: base})
	if err != nil {
		return nil, fsError("delete", p, err)
	}
	if err := unix.Fsync(d.fd); err != nil {
		return nil, fsError("fsync directory", p, err)
	}
	return &fsmcpv1.DeleteResponse{Removed: n, Undo: token}, nil
}

func isEmptyDir(dirfd int, name string) (bool, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && len(names) == 0 {
		return true, nil // io.EOF
	}
	return len(names) == 0, nil
}

// Undo implements fsmcpv1.WorkerServiceServer. It puts a quarantined entry
// back where it came from, if nothing newer is there: a deleted entry only
// to a free name, a replaced file only over the very file that replaced it,
// unchanged since. A restored file's successor goes into the quarantine in
// its turn, and the reply's token brings it back.
func (s *Service) Undo(ctx context.Context, req *fsmcpv1.UndoRequest) (*fsmcpv1.UndoResponse, error) {
	if s.quarantine == nil {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, "", "undo: the server runs without --quarantine")
	}
	e, err := s.quarantine.take(req.GetToken())
	if err != nil {
		return nil, err
	}
	resp, err := s.undo(ctx, e)
	s.quarantine.release(e, err == nil)
	return resp, err
}

// undo restores e. Bringing a name (a directory, perhaps) into the root
// is a directory move: it holds s.renames exclusively, as fs_move does.
// The path is the real root-relative path recorded when e was kept, judged
// again like any mutation of it.
func (s *Service) undo(ctx context.Context, e *qEntry) (*fsmcpv1.UndoResponse, error) {
	q, p := s.quarantine, e.path
	unlockRenames := s.lockRenames(true)
	defer unlockRenames()
	kind := accessMutate
	if e.displaced {
		kind = accessRewrite
	}
	d, base, err := s.openName("undo", p, kind)
	if errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the directory that held it is gone")
	}
	if err != nil {
		return nil, err
	}
	defer d.close()
	if d.st.Dev != e.parentDev || d.st.Ino != e.parentIno || base != e.base {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the path no longer leads to the directory that held it")
	}
	unlock, err := s.locks.lock(ctx, lockKey{d.st.Dev, d.st.Ino, base})
	if err != nil {
		return nil, fsError("undo", p, err)
	}
	defer unlock()
	kept, err := fstatat(q.fd, e.name)
	if err != nil {
		return nil, fsError("undo", p, err)
	}
	resp := &fsmcpv1.UndoResponse{Path: []byte(p), Type: fileType(kept.Mode)}
	if !e.displaced {
		if err := renameNoReplace(q.fd, e.name, d.fd, base); errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: something new is at the path; nothing was restored")
		} else if err != nil {
			return nil, fsError("undo", p, err)
		}
		if err := unix.Fsync(d.fd); err != nil {
			return nil, fsError("fsync directory", p, err)
		}
		return resp, nil
	}
	// The file at the path must be the one the write put there, with the
	// content it wrote: same inode, size and mtime, same sha256.
	cur, err := s.current(ctx, "undo", d, base, p, false)
	if errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_REGULAR}) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: something else is at the path now; nothing was restored")
	}
	if err != nil {
		return nil, err
	}
	defer cur.close()
	if !cur.exists {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file was removed since; nothing was restored")
	}
	if idOf(cur.st) != e.now || cur.sha != e.nowSHA {
		ee := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file changed since; restoring would lose the newer change")
		ee.CurrentSHA256 = cur.sha
		return nil, ee
	}
	if err := unix.Renameat2(q.fd, e.name, d.fd, base, unix.RENAME_EXCHANGE); err != nil {
		return nil, fsError("undo", p, err)
	}
	// The quarantine name now holds what was at base: it must be the file
	// checked above, or another writer won the race and gets it back.
	swapped, err := fstatat(q.fd, e.name)
	if err != nil || swapped.Dev != e.now.dev || swapped.Ino != e.now.ino {
		if xerr := unix.Renameat2(q.fd, e.name, d.fd, base, unix.RENAME_EXCHANGE); xerr != nil {
			bug(fmt.Errorf("exchange back after a lost undo race: %w", xerr))
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, p, "the file changed during the undo and could not be put back")
		}
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file changed during the undo; nothing was restored")
	}
	if err := unix.Fsync(d.fd); err != nil {
		return nil, fsError("fsync directory", p, err)
	}
	unix.Fsync(q.fd)
	// The successor stays in the quarantine under the same name, as an
	// entry of its own whose undo redoes the write.
	restored, err := fstatat(d.fd, base)
	if err != nil {
		return nil, fsError("undo", p, err)
	}
	redo := &qEntry{name: e.name, bytes: swapped.Size, path: p, parentDev: e.parentDev, parentIno: e.parentIno,
		base: base, displaced: true, now: idOf(restored), nowSHA: e.keptSHA, keptSHA: e.nowSHA}
	q.mu.Lock()
	q.add(redo)
	q.evict()
	if q.byID[redo.id] == redo {
		resp.Undo = q.token(redo.id)
	}
	q.mu.Unlock()
	return resp, nil
}
