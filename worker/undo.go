package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
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
		token, _, err = s.quarantine.keep(d.fd, tmp, qPart{kind: partSwap, path: joinRel(d.rel, base), parentDev: d.st.Dev, parentIno: d.st.Ino,
			base: base, now: idOf(st), nowSHA: newSHA, keptSHA: oldSHA})
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
				if xerr := fileio.RenameNoReplace(d.fd, name, d.fd, base); xerr != nil {
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
	token, n, err := s.quarantine.keep(d.fd, name, qPart{kind: partRestore, path: joinRel(d.rel, base), parentDev: d.st.Dev, parentIno: d.st.Ino, base: base})
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

// undoStep is one part of an undo: the part, the directory that holds
// its path, and what the undo did, to reverse it if a later part fails.
type undoStep struct {
	part qPart
	d    *parent
	// typ is the type of what comes back to the path (or, for partTake,
	// of what goes).
	typ fsmcpv1.FileType
	// taken is the quarantine name a partTake moved the file to.
	taken string
}

// undo restores every part of e, or none: each path is resolved, every
// part's precondition is checked under the entry locks (taken in the fixed
// order of fs_patch), and only then does anything move; should a part
// still fail (another process raced it), those already done are reversed.
// Bringing a name (a directory, perhaps) into the root is a directory
// move: it holds s.renames exclusively, as fs_move does. Each path is the
// real root-relative path recorded when e was kept, judged again like any
// mutation of it.
func (s *Service) undo(ctx context.Context, e *qEntry) (*fsmcpv1.UndoResponse, error) {
	q := s.quarantine
	unlockRenames := s.lockRenames(true)
	defer unlockRenames()
	steps := make([]*undoStep, len(e.parts))
	for i, part := range e.parts {
		d, err := s.openPart(ctx, part)
		if err != nil {
			return nil, err
		}
		defer d.close()
		steps[i] = &undoStep{part: part, d: d}
	}
	order := slices.Clone(steps)
	slices.SortFunc(order, func(a, b *undoStep) int { return cmp3(a.key(), b.key()) })
	for _, st := range order {
		unlock, err := s.locks.lock(ctx, st.key())
		if err != nil {
			return nil, fsError("undo", st.part.path, err)
		}
		defer unlock()
	}
	for _, st := range steps {
		if err := s.checkPart(ctx, st); err != nil {
			return nil, err
		}
	}
	for i, st := range steps {
		if err := s.applyPart(st); err != nil {
			for k := i - 1; k >= 0; k-- {
				if rerr := s.reversePart(steps[k]); rerr != nil {
					bug(fmt.Errorf("reverse the undo of %q: %w", steps[k].part.path, rerr))
				}
			}
			return nil, err
		}
	}
	for _, st := range steps {
		if err := unix.Fsync(st.d.fd); err != nil {
			return nil, fsError("fsync directory", st.part.path, err)
		}
	}
	unix.Fsync(q.fd)
	resp := &fsmcpv1.UndoResponse{Path: []byte(e.parts[0].path), Type: steps[0].typ}
	for _, st := range steps {
		resp.Paths = append(resp.Paths, []byte(st.part.path))
	}
	// What the undo displaced or took stays in the quarantine as an entry
	// of its own, whose undo redoes the change; a deleted tree that came
	// back has none.
	redo := &qEntry{}
	for _, st := range steps {
		part, size, ok := st.redo(q)
		if !ok {
			return resp, nil
		}
		redo.parts = append(redo.parts, part)
		redo.bytes += size
	}
	if redo.parts[0].kind == partCut {
		// Kept, counted and evicted like any entry; no token redoes it.
		q.register(redo)
		return resp, nil
	}
	resp.Undo = q.register(redo)
	return resp, nil
}

func (st *undoStep) key() lockKey { return lockKey{st.d.st.Dev, st.d.st.Ino, st.part.base} }

// openPart resolves a part's recorded path for the undo, which must still
// lead to the very directory that held it.
func (s *Service) openPart(ctx context.Context, part qPart) (*parent, error) {
	p := part.path
	kind := accessMutate
	if part.kind != partRestore {
		kind = accessRewrite
	}
	d, base, err := s.openName(ctx, "undo", p, kind)
	if errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) && part.gone {
		return s.remakeParent(ctx, part, err)
	}
	if errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the directory that held it is gone; nothing was restored")
	}
	if err != nil {
		return nil, err
	}
	if d.st.Dev != part.parentDev || d.st.Ino != part.parentIno || base != part.base {
		d.close()
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the path no longer leads to the directory that held it; nothing was restored")
	}
	return d, nil
}

// remakeParent makes again the directories of a restored part's path that
// the change removed with it (nf is openName's not_found), judged as a
// patch judges a file it creates in directories it makes (openMissing),
// and returns the directory that will hold it. A directory made again is
// new: it has fsmcp's mode for new directories, and no identity to check.
func (s *Service) remakeParent(ctx context.Context, part qPart, nf error) (*parent, error) {
	f := &patchFile{path: part.path, create: true}
	d, _, err := s.openMissing(ctx, f, nf)
	if err != nil {
		return nil, err
	}
	defer d.close()
	fd, rel := d.fd, d.rel
	for _, m := range f.mkdirs {
		if err := unix.Mkdirat(fd, m, newDirMode); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fsError("undo", part.path, err)
		}
		unix.Fsync(fd)
		rel = joinRel(rel, m)
		next, err := unix.Openat(fd, m, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if fd != d.fd {
			unix.Close(fd)
		}
		if err != nil {
			return nil, fsError("undo", part.path, err)
		}
		fd = next
	}
	if fd != d.fd {
		unix.Close(fd)
	}
	return s.openDir("undo", part.path, rel)
}

// checkPart refuses a part that cannot be undone without losing a newer
// change: a restore needs a free path; a swap or a take needs the very
// file the change put there, unchanged (same inode, size and mtime, same
// sha256).
func (s *Service) checkPart(ctx context.Context, st *undoStep) error {
	q, part, p := s.quarantine, st.part, st.part.path
	if part.kind == partTruncate {
		return s.checkTruncate(ctx, st)
	}
	if part.kind != partTake {
		kept, err := fileio.Lstatat(q.fd, part.name)
		if err != nil {
			return fsError("undo", p, err)
		}
		st.typ = fileType(kept.Mode)
	}
	if part.kind == partRestore {
		if _, err := fileio.Lstatat(st.d.fd, part.base); !errors.Is(err, unix.ENOENT) {
			if err != nil {
				return fsError("undo", p, err)
			}
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: something new is at the path; nothing was restored")
		}
		return nil
	}
	cur, err := s.current(ctx, "undo", st.d, part.base, p, false)
	if errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_REGULAR}) {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: something else is at the path now; nothing was restored")
	}
	if err != nil {
		return err
	}
	defer cur.close()
	if !cur.exists {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file was removed since; nothing was restored")
	}
	if idOf(cur.st) != part.now || cur.sha != part.nowSHA {
		ee := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file changed since; restoring would lose the newer change")
		ee.CurrentSHA256 = cur.sha
		return ee
	}
	if part.kind == partTake {
		st.typ = fileType(cur.st.Mode)
	}
	return nil
}

// applyPart undoes one checked part. A swap or take checks that what left
// the path is the file checked, else puts it back and fails: another
// writer won the race.
func (s *Service) applyPart(st *undoStep) error {
	q, part, p, d := s.quarantine, st.part, st.part.path, st.d
	lostRace := func(back func() error) error {
		if xerr := back(); xerr != nil {
			bug(fmt.Errorf("put back after a lost undo race: %w", xerr))
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, p, "the file changed during the undo and could not be put back")
		}
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file changed during the undo; nothing was restored")
	}
	switch part.kind {
	case partRestore:
		if err := fileio.RenameNoReplace(q.fd, part.name, d.fd, part.base); errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: something new is at the path; nothing was restored")
		} else if err != nil {
			return fsError("undo", p, err)
		}
	case partSwap:
		if err := unix.Renameat2(q.fd, part.name, d.fd, part.base, unix.RENAME_EXCHANGE); err != nil {
			return fsError("undo", p, err)
		}
		// The quarantine name now holds what was at the path.
		if swapped, err := fileio.Lstatat(q.fd, part.name); err != nil || swapped.Dev != part.now.dev || swapped.Ino != part.now.ino {
			return lostRace(func() error { return unix.Renameat2(q.fd, part.name, d.fd, part.base, unix.RENAME_EXCHANGE) })
		}
	case partTruncate:
		return s.cutAppend(st)
	case partUncut:
		st.taken = part.name
		return s.uncutAppend(st)
	case partTake:
		st.taken = q.newName()
		if err := fileio.RenameNoReplace(d.fd, part.base, q.fd, st.taken); err != nil {
			return fsError("undo", p, err)
		}
		if taken, err := fileio.Lstatat(q.fd, st.taken); err != nil || taken.Dev != part.now.dev || taken.Ino != part.now.ino {
			return lostRace(func() error { return fileio.RenameNoReplace(q.fd, st.taken, d.fd, part.base) })
		}
	}
	return nil
}

// reversePart puts back what applyPart did.
func (s *Service) reversePart(st *undoStep) error {
	q, part, d := s.quarantine, st.part, st.d
	switch part.kind {
	case partRestore:
		return fileio.RenameNoReplace(d.fd, part.base, q.fd, part.name)
	case partSwap:
		return unix.Renameat2(q.fd, part.name, d.fd, part.base, unix.RENAME_EXCHANGE)
	case partTruncate:
		return s.uncutAppend(st)
	case partUncut:
		f, err := fileio.OpenRegular(d.fd, part.base, unix.O_RDWR)
		if err != nil {
			return err
		}
		defer f.Close()
		now, err := fstat(f)
		if err != nil {
			return err
		}
		return fileio.MoveTail(f, part.oldSize, now.Size, q.fd, part.name)
	default:
		return fileio.RenameNoReplace(q.fd, st.taken, d.fd, part.base)
	}
}

// redo is the part that undoes this step's undo, and the bytes it keeps;
// false when there is none (a deleted entry whose content is unknown came
// back).
func (st *undoStep) redo(q *Quarantine) (qPart, int64, bool) {
	part := st.part
	back := qPart{path: part.path, parentDev: part.parentDev, parentIno: part.parentIno, base: part.base}
	switch part.kind {
	case partRestore:
		restored, err := fileio.Lstatat(st.d.fd, part.base)
		if part.keptSHA == "" || err != nil {
			return qPart{}, 0, false
		}
		back.kind, back.now, back.nowSHA = partTake, idOf(restored), part.keptSHA
		return back, 0, true
	case partTruncate:
		cut, err := fileio.Lstatat(q.fd, st.taken)
		if err != nil {
			return qPart{}, 0, false
		}
		back.kind, back.name = partCut, st.taken
		return back, cut.Size, true
	case partUncut:
		// The bytes are back in the file; its undo cuts them again.
		now, err := fileio.Lstatat(st.d.fd, part.base)
		if err != nil {
			return qPart{}, 0, false
		}
		back.kind, back.now, back.nowSHA, back.keptSHA, back.oldSize = partTruncate, idOf(now), part.keptSHA, part.nowSHA, part.oldSize
		return back, 0, true
	case partSwap:
		restored, err := fileio.Lstatat(st.d.fd, part.base)
		successor, serr := fileio.Lstatat(q.fd, part.name)
		if err != nil || serr != nil {
			return qPart{}, 0, false
		}
		back.kind, back.name, back.now, back.nowSHA, back.keptSHA = partSwap, part.name, idOf(restored), part.keptSHA, part.nowSHA
		return back, successor.Size, true
	default:
		taken, err := fileio.Lstatat(q.fd, st.taken)
		if err != nil {
			return qPart{}, 0, false
		}
		back.kind, back.name, back.keptSHA = partRestore, st.taken, part.nowSHA
		return back, taken.Size, true
	}
}
