package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/appendlog"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// An append writes in place, at the end of the same inode (so hard links
// and the inode are kept and its cost follows the bytes appended, not the
// file), under the file's lock:
//
//  1. the old size and sha256 and the new size and sha256 (continued from
//     the digest state the hash cache keeps) are written to a reusable
//     slot in the state directory, with one fdatasync;
//  2. the bytes are written (O_APPEND) and the file fdatasynced;
//  3. the slot is marked free (not synced: a record left behind is
//     recognised as done, below).
//
// Readers may see the appended bytes before the reply. After a crash,
// recovery reads every slot that holds a record: a file (the same inode)
// of the new size and sha256 is kept; one of a size from the old to the
// new whose first old-size bytes still hash to the old sha256 is
// truncated back to the old size; anything else (the file changed since,
// or a record whose free mark never reached the disk) is left as it is.
// So a crash leaves the file as it was or fully appended, never torn.

// appendInPlace appends data to the file t holds (which exists and was
// checked against the precondition), as described above.
func (s *Service) appendInPlace(ctx context.Context, t *editTarget, p string, data []byte) (_ *commitResult, rerr error) {
	if s.state == nil {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, p, "append: no state directory for its journal")
	}
	cur := t.cur
	// O_APPEND: an append-only file (chattr +a) takes it, and every byte
	// goes to the end whatever the offset.
	fd, err := unix.Openat(t.d.fd, t.base, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fsError("append", p, err)
	}
	f := os.NewFile(uintptr(fd), t.base)
	defer f.Close()
	// The file opened for writing must be the one hashed, unwritten since.
	st, err := fstat(f)
	if err != nil {
		return nil, fsError("append", p, err)
	}
	if !sameInode(st, cur.st) || st.Size != cur.st.Size || st.Mtim != cur.st.Mtim || st.Ctim != cur.st.Ctim {
		e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "append: the file changed meanwhile; nothing was written")
		e.CurrentSHA256 = s.hashName(ctx, t.d, t.base)
		return nil, e
	}
	b := &body{spliced: true, off: cur.st.Size, insert: data}
	sum, err := b.sha256(ctx, cur, &s.hashes.Hashed)
	if err != nil {
		return nil, fsError("read", p, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fsError("append", p, err)
	}
	newSize := cur.st.Size + int64(len(data))
	// As fs_write does: setuid, setgid and file capabilities do not
	// survive a change of content (the kernel drops them only for
	// writers without CAP_FSETID).
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		if err := unix.Fchmod(fd, st.Mode&0o777|st.Mode&unix.S_ISVTX); err != nil {
			return nil, fsError("chmod", p, err)
		}
	}
	if err := unix.Fremovexattr(fd, "security.capability"); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.EOPNOTSUPP) {
		return nil, fsError("removexattr", p, err)
	}
	slot, err := s.appends.Take(int(s.state.Fd()))
	if err != nil {
		return nil, fsError("append journal", p, err)
	}
	defer s.appends.Put(slot)
	rec := &appendlog.Record{RootDev: s.rootDev, RootIno: s.rootIno, Dir: []byte(t.d.rel), Name: []byte(t.base), Ino: st.Ino,
		OldSize: cur.st.Size, OldSHA: cur.sha, NewSize: newSize, NewSHA: sum.Hex}
	if err := appendlog.Write(slot, rec); err != nil {
		return nil, fsError("append journal", p, err)
	}
	if s.beforeCommit != nil {
		s.beforeCommit(p)
	}
	// From here to the free mark the append does not look at ctx: a torn
	// append is only undone.
	_, werr := f.Write(data)
	if werr == nil {
		werr = unix.Fdatasync(fd)
	}
	if werr != nil {
		// Back to the old size, as recovery would.
		if terr := f.Truncate(cur.st.Size); terr == nil {
			unix.Fdatasync(fd)
			appendlog.Free(slot)
		}
		return nil, fsError("append", p, werr)
	}
	appendlog.Free(slot)
	res := &commitResult{sha256: sum.Hex, size: newSize}
	if now, err := fstat(f); err == nil && sameInode(now, st) && now.Size == newSize {
		// The next precondition on it, or the next append, reads none of
		// it again. (As with putPlaced, a write by another process in the
		// same timestamp tick that keeps the size would go unseen.)
		s.hashes.PutAppended(now, sum)
		if s.quarantine != nil {
			res.undo = s.quarantine.register(&qEntry{parts: []qPart{{kind: partTruncate, path: joinRel(t.d.rel, t.base),
				parentDev: t.d.st.Dev, parentIno: t.d.st.Ino, base: t.base, now: idOf(now), nowSHA: sum.Hex, keptSHA: cur.sha, oldSize: cur.st.Size}}})
		}
	}
	return res, nil
}

// recoverAppends settles the appends a crash interrupted (see above),
// from the slots in the state directory, and keeps the slots for reuse.
// A record that does not verify, or whose name the resolver and the
// policy of this start refuse, is named on stderr and cleared; its file
// is left as it is.
func (s *Service) recoverAppends() error {
	stateFD := int(s.state.Fd())
	names, err := namesWith(stateFD, appendlog.SlotPrefix)
	if err != nil {
		return err
	}
	cr := &callRules{tool: "fs_write", policy: s.policy}
	if s.rules != nil {
		cr = s.newCallRules("fs_write")
	}
	ctx := context.WithValue(context.Background(), callRulesKey{}, cr)
	for _, n := range names {
		fd, err := unix.Openat(stateFD, n, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		slot := os.NewFile(uintptr(fd), n)
		s.appends.Made++
		r, err := appendlog.Read(slot)
		if err == nil && r != nil {
			err = s.settleAppend(ctx, r)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "fsmcp worker: append record %s not replayed: %v\n", n, err)
		}
		appendlog.Free(slot)
		if err := slot.Sync(); err != nil {
			slot.Close()
			return err
		}
		s.appends.Put(slot)
	}
	return nil
}

// settleAppend keeps or truncates the file of one append record.
func (s *Service) settleAppend(ctx context.Context, r *appendlog.Record) error {
	name := string(r.Name)
	p := joinRel(string(r.Dir), name)
	switch {
	case r.RootDev != s.rootDev || r.RootIno != s.rootIno:
		return fmt.Errorf("written for another root")
	case name == "" || name == "." || name == ".." || strings.Contains(name, "/"):
		return fmt.Errorf("%q is not one name", name)
	case r.OldSize < 0 || r.NewSize < r.OldSize || !isSHA256Hex(r.OldSHA) || !isSHA256Hex(r.NewSHA):
		return fmt.Errorf("%q: sizes or digests out of shape", p)
	}
	d, base, err := s.openName(ctx, "append", p, accessRewrite)
	var we *Error
	if errors.As(err, &we) && we.Code == fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%q: %v", p, err)
	}
	defer d.close()
	if d.rel != string(r.Dir) || base != name {
		return fmt.Errorf("%q resolves elsewhere", p)
	}
	fd, err := unix.Openat(d.fd, base, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%q: %v", p, err)
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	st, err := fstat(f)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != r.Ino || st.Size < r.OldSize || st.Size > r.NewSize {
		// Another file now, or changed since: not this append's to settle.
		return nil
	}
	if st.Size == r.NewSize {
		if sum, err := prefixSHA(ctx, f, st.Size); err == nil && sum == r.NewSHA {
			return nil
		}
	}
	if sum, err := prefixSHA(ctx, f, r.OldSize); err != nil || sum != r.OldSHA {
		return fmt.Errorf("%q: its first %d bytes no longer hash to the old sha256; left as it is", p, r.OldSize)
	}
	if err := f.Truncate(r.OldSize); err != nil {
		return fmt.Errorf("%q: truncate: %v", p, err)
	}
	return unix.Fsync(fd)
}

// prefixSHA is the sha256 of the first n bytes of f.
func prefixSHA(ctx context.Context, f *os.File, n int64) (string, error) {
	h := sha256.New()
	if err := fileio.HashRange(ctx, h, f, 0, n); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkTruncate is checkPart for the undo of an append: the file at the
// path must be the inode appended to, at least the old size, with its
// first old-size bytes hashing to the sha256 before the append.
func (s *Service) checkTruncate(ctx context.Context, st *undoStep) error {
	part, p := st.part, st.part.path
	f, err := fileio.OpenRegular(st.d.fd, part.base, unix.O_RDONLY)
	if err != nil {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the appended file is gone or not a regular file; nothing was cut")
	}
	defer f.Close()
	now, err := fstat(f)
	if err != nil {
		return fsError("undo", p, err)
	}
	if now.Dev != part.now.dev || now.Ino != part.now.ino || now.Size < part.oldSize {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file was replaced or cut since the append; nothing was cut")
	}
	if sum, err := prefixSHA(ctx, f, part.oldSize); err != nil || sum != part.keptSHA {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p,
			"undo: the file's first %d bytes no longer hash to its sha256 before the append; nothing was cut", part.oldSize)
	}
	st.typ = fsmcpv1.FileType_FILE_TYPE_FILE
	return nil
}

// cutAppend truncates the checked file back to the old size, keeping
// the bytes it cuts in the quarantine (st.taken), durable before the cut.
func (s *Service) cutAppend(st *undoStep) error {
	q, part, p := s.quarantine, st.part, st.part.path
	f, err := fileio.OpenRegular(st.d.fd, part.base, unix.O_RDWR)
	if err != nil {
		return fsError("undo", p, err)
	}
	defer f.Close()
	now, err := fstat(f)
	if err != nil || now.Ino != part.now.ino || now.Size < part.oldSize {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "undo: the file changed during the undo; nothing was cut")
	}
	st.taken = q.newName()
	if err := fileio.MoveTail(f, part.oldSize, now.Size, q.fd, st.taken); err != nil {
		return fsError("undo", p, err)
	}
	return nil
}

// cutTail cuts a file a rewind restores in place (f.cut) back to its
// checkpoint's bytes, f.data, which the commit's checks found as its
// prefix: the bytes past them go into the quarantine under f.qname.
func (s *Service) cutTail(f *patchFile, qfd int) error {
	file, err := fileio.OpenRegular(f.d.fd, f.base, unix.O_RDWR)
	if err != nil {
		return fsError("rewind", f.path, err)
	}
	defer file.Close()
	now, err := fstat(file)
	if err != nil || !sameInode(now, f.cur.st) || now.Size != f.cur.st.Size || now.Mtim != f.cur.st.Mtim {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, f.path, "rewind: the file changed meanwhile; nothing was changed")
	}
	if err := fileio.MoveTail(file, int64(len(f.data)), now.Size, qfd, f.qname); err != nil {
		return fsError("rewind", f.path, err)
	}
	return nil
}

// uncutAppend reverses cutAppend: the cut bytes go back at the end.
func (s *Service) uncutAppend(st *undoStep) error {
	q, part := s.quarantine, st.part
	cut, err := fileio.OpenRegular(q.fd, st.taken, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer cut.Close()
	f, err := fileio.OpenRegular(st.d.fd, part.base, unix.O_WRONLY|unix.O_APPEND)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, cut); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Unlinkat(q.fd, st.taken, 0)
}
