package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
	"github.com/fsmcp/fsmcp/worker/internal/textedit"
	"golang.org/x/sys/unix"
)

// newFileMode is the mode of a file fs_write creates. It is set with fchmod,
// so the worker's umask never changes it.
const newFileMode = 0o644

// Write implements fsmcpv1.WorkerServiceServer. It replaces or creates the
// regular file at the path atomically, if the precondition holds; with
// append, it writes the new content at the end of the existing file in
// place (append.go).
func (s *Service) Write(ctx context.Context, req *fsmcpv1.WriteRequest) (*fsmcpv1.WriteResponse, error) {
	p, err := editPath(req.GetPath(), req.GetIfSha256(), req.GetMustNotExist())
	if err != nil {
		return nil, err
	}
	op := "write"
	if req.GetAppend() {
		op = "append"
	}
	// The content is in memory already; an append's result is copied
	// file to file and never is.
	if err := s.checkFileSize(op, p, int64(len(req.GetContent()))); err != nil {
		return nil, err
	}
	if err := checkCharset(p, req.GetCharset()); err != nil {
		return nil, err
	}
	content, err := encodeText(p, op+": content", req.GetCharset(), req.GetContent(), false)
	if err != nil {
		return nil, err
	}
	// A dry run reads the old content for its diff; an append splices it.
	t, err := s.openEdit(ctx, op, p, req.GetDryRun() && !req.GetAppend(), req.GetIfSha256())
	if err != nil {
		if req.GetMustNotExist() {
			err = missingDirectory(err, p)
		}
		return nil, err
	}
	defer t.close()
	cur := t.cur
	if req.GetAppend() && cur.exists && !req.GetDryRun() {
		res, err := s.appendInPlace(ctx, t, p, content)
		if err != nil {
			return nil, err
		}
		return &fsmcpv1.WriteResponse{Sha256: res.sha256, Size: res.size, Undo: res.undo}, nil
	}
	b := &body{data: content}
	if req.GetAppend() && cur.exists {
		b = &body{spliced: true, off: cur.st.Size, insert: content}
	}
	res, err := s.commitOrPreview(ctx, t.d, t.base, p, cur, b, req.GetDryRun())
	if err != nil {
		return nil, err
	}
	return &fsmcpv1.WriteResponse{Sha256: res.sha256, Size: res.size,
		Created: !cur.exists, BrokeHardLink: res.brokeHardLink, Diff: res.diff, Undo: res.undo}, nil
}

// Replace implements fsmcpv1.WorkerServiceServer. It applies the edits in
// order to the file's bytes and commits the result like Write; if any edit
// fails, nothing is written.
func (s *Service) Replace(ctx context.Context, req *fsmcpv1.ReplaceRequest) (*fsmcpv1.ReplaceResponse, error) {
	p, err := clientPath(req.GetPath())
	if err != nil {
		return nil, err
	}
	if len(req.GetEdits()) == 0 {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "replace: no edits")
	}
	for i, e := range req.GetEdits() {
		if len(e.GetOld()) == 0 {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "replace: edit %d: old is empty", i)
		}
	}
	// A null if_sha256 means "must not exist", which leaves nothing to edit:
	// the answer is not_found or precondition_failed, never a write.
	if err := checkPrecondition(p, req.GetIfSha256(), req.GetIfSha256() == ""); err != nil {
		return nil, err
	}
	if err := checkCharset(p, req.GetCharset()); err != nil {
		return nil, err
	}
	t, err := s.openEdit(ctx, "replace", p, true, req.GetIfSha256())
	if err != nil {
		return nil, err
	}
	defer t.close()
	cur := t.cur
	if !cur.exists {
		// if_sha256 was null, which the check lets pass for no file.
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, p, "replace: the file does not exist")
	}
	edits, err := replaceEdits(p, cur.data, req.GetEdits(), req.GetCharset(), req.GetEol())
	if err != nil {
		return nil, err
	}
	data, n, release, err := s.applyEdits(ctx, p, cur.data, edits)
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := s.commitOrPreview(ctx, t.d, t.base, p, cur, &body{data: data}, req.GetDryRun())
	if err != nil {
		return nil, err
	}
	return &fsmcpv1.ReplaceResponse{Sha256: res.sha256, Size: res.size, Replacements: n,
		BrokeHardLink: res.brokeHardLink, Diff: res.diff, Undo: res.undo}, nil
}

// editTarget is the file a single-file edit (write, append, replace,
// splice) works on, held for the call: a heavy-call slot, the parent
// resolved for a rewrite, the per-entry lock, and the current file as
// hashed.
type editTarget struct {
	d    *parent
	base string
	cur  *current
	done []func()
}

// openEdit takes, in this order, a heavy-call slot, the parent of p
// through the resolver (accessRewrite: the precondition hashes the current
// file), the per-entry lock, and the current file (with all, its bytes),
// and checks it against ifSHA ("": it must not exist). close releases them
// in reverse.
func (s *Service) openEdit(ctx context.Context, op, p string, all bool, ifSHA string) (_ *editTarget, rerr error) {
	t := &editTarget{}
	defer func() {
		if rerr != nil {
			t.close()
		}
	}()
	done, err := s.heavy(ctx, op, p)
	if err != nil {
		return nil, err
	}
	t.done = append(t.done, done)
	d, base, unlockRenames, err := s.openMutationPath(ctx, op, p, accessRewrite)
	if err != nil {
		return nil, err
	}
	t.d, t.base = d, base
	t.done = append(t.done, unlockRenames, d.close)
	unlock, err := s.locks.lock(ctx, lockKey{d.st.Dev, d.st.Ino, base})
	if err != nil {
		return nil, fsError(op, p, err)
	}
	t.done = append(t.done, unlock)
	if t.cur, err = s.current(ctx, op, d, base, p, all); err != nil {
		return nil, err
	}
	t.done = append(t.done, t.cur.close)
	if err := t.cur.check(p, ifSHA); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *editTarget) close() {
	for i := len(t.done) - 1; i >= 0; i-- {
		t.done[i]()
	}
	t.done = nil
}

// applyEdits applies edits in order to a copy of data. Each edit must match
// exactly once, or at least once when it says all. The size of each result
// is computed from the match count before it is allocated: over
// --max-file-bytes is too_large, and its bytes are reserved from the
// memory budget first. It checks ctx as it scans and copies, so an
// abandoned call stops within milliseconds. The release frees the
// reservation of the returned bytes.
func (s *Service) applyEdits(ctx context.Context, p string, data []byte, edits []*fsmcpv1.Edit) ([]byte, int64, func(), error) {
	var total int64
	release := func() {}
	fail := func(err error) ([]byte, int64, func(), error) {
		release()
		return nil, 0, nil, err
	}
	for i, e := range edits {
		old, repl := e.GetOld(), e.GetNew()
		n, err := textedit.CountMatches(ctx, data, old)
		switch {
		case err != nil:
			return fail(fsError("replace", p, err))
		case n == 0:
			return fail(noMatch(p, data, old, "replace: edit %d: old does not occur in the file", i))
		case n > 1 && !e.GetAll():
			err := newError(fsmcpv1.ErrorCode_ERROR_CODE_AMBIGUOUS_MATCH, p,
				"replace: edit %d: old occurs %d times; make it unique or set all", i, n)
			err.Count = n
			return fail(err)
		}
		// n ≤ len(data) and each length ≤ link.MaxMessageBytes: no overflow.
		size := int64(len(data)) + n*(int64(len(repl))-int64(len(old)))
		if err := s.checkFileSize(fmt.Sprintf("replace: edit %d", i), p, size); err != nil {
			return fail(err)
		}
		got, err := s.reserve(ctx, "replace", p, size)
		if err != nil {
			return fail(err)
		}
		out, err := textedit.ReplaceAll(ctx, data, old, repl, size)
		release()
		release = got
		if err != nil {
			return fail(fsError("replace", p, err))
		}
		data = out
		total += n
	}
	return data, total, release, nil
}

// editPath is the client path of a file edit whose precondition is
// ifSHA or mustNotExist, once both are well formed.
func editPath(raw []byte, ifSHA string, mustNotExist bool) (string, error) {
	p, err := clientPath(raw)
	if err != nil {
		return "", err
	}
	return p, checkPrecondition(p, ifSHA, mustNotExist)
}

func checkPrecondition(p, ifSHA string, mustNotExist bool) error {
	switch {
	case ifSHA == "" && !mustNotExist:
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "if_sha256 is required")
	case ifSHA != "" && mustNotExist:
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "if_sha256 and must_not_exist exclude each other")
	case ifSHA != "" && !isSHA256Hex(ifSHA):
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "if_sha256 must be 64 lowercase hex digits")
	}
	return nil
}

// current is the file a write would replace, as it was hashed.
type current struct {
	exists bool
	// f is open on the inode that was hashed; st is its fstat after the
	// hash.
	f   *os.File
	st  *unix.Stat_t
	sha string
	// state is the digest's state after the file's last byte, when it
	// is kept (see hashcache.Sum).
	state []byte
	data  []byte
	// release returns data's reservation of the memory budget.
	release func()
}

func (c *current) close() {
	if c.f != nil {
		c.f.Close()
	}
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// check compares the file with the precondition: ifSHA empty means the file
// must not exist.
func (c *current) check(p, ifSHA string) error {
	switch {
	case ifSHA == "" && c.exists:
		e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the file exists (if_sha256 is null)")
		e.CurrentSHA256 = c.sha
		return e
	case ifSHA != "" && !c.exists:
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the file does not exist (if_sha256 names content)")
	case ifSHA != "" && c.sha != ifSHA:
		e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the file's sha256 is not if_sha256")
		e.CurrentSHA256 = c.sha
		return e
	}
	return nil
}

// current opens and hashes the file named base in d, if there is one (and
// with all, keeps its bytes). Only a regular file qualifies: the final
// component is never followed, so a symlink is refused, as are fifos,
// sockets and devices, which are never opened.
func (s *Service) current(ctx context.Context, op string, d *parent, base, p string, all bool) (*current, error) {
	lst, err := fileio.Lstatat(d.fd, base)
	if errors.Is(err, unix.ENOENT) {
		return &current{}, nil
	}
	if err != nil {
		return nil, fsError(op, p, err)
	}
	if err := regularOnly(op, p, lst); err != nil {
		return nil, err
	}
	// O_NOFOLLOW: a symlink swapped in after the lstat fails with ELOOP.
	// O_NONBLOCK: a fifo swapped in cannot block the open.
	fd, err := unix.Openat(d.fd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_REGULAR, p, "%s: not a regular file", op)
	case err != nil:
		return nil, fsError(op, p, err)
	}
	c := &current{exists: true, f: os.NewFile(uintptr(fd), base)}
	before, err := fstat(c.f)
	if err == nil {
		err = regularOnly(op, p, before)
	}
	if err != nil {
		c.close()
		return nil, fsError(op, p, err)
	}
	start := time.Now()
	var fs hashcache.Sum
	cached := false
	if all {
		if err := s.checkFileSize(op, p, before.Size); err != nil {
			c.close()
			return nil, err
		}
		if c.release, err = s.reserve(ctx, op, p, before.Size); err != nil {
			c.close()
			return nil, err
		}
		// Read exactly the size fstat gave; a file that grew meanwhile is
		// caught by the stat comparison below.
		c.data = make([]byte, before.Size)
		if _, err = fileio.ReadFullCtx(ctx, c.f, c.data, textedit.CtxEvery); errors.Is(err, io.ErrUnexpectedEOF) {
			c.close()
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "%s: the file changed while it was read", op)
		}
		h := sha256.New()
		h.Write(c.data)
		fs = hashcache.SumOf(h, before.Size)
	} else if fs, cached = s.hashes.Lookup(hashcache.KeyOf(before)); !cached {
		// The cache's key proves the bytes (see hashcache.Cache): a hit is as
		// good as reading them.
		fs, err = hashFile(ctx, c.f)
	}
	if err == nil {
		c.st, err = fstat(c.f)
	}
	if err != nil {
		c.close()
		return nil, fsError("read", p, err)
	}
	// An in-place writer changes mtime, ctime or size: the hash would then
	// describe no version the file ever had.
	if c.st.Mtim != before.Mtim || c.st.Ctim != before.Ctim || c.st.Size != before.Size {
		c.close()
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "%s: the file changed while it was read", op)
	}
	if !cached {
		s.hashes.Hashed.Add(before.Size)
		s.hashes.Put(before, c.st, start, fs)
	}
	c.sha, c.state = fs.Hex, fs.State
	// Replacing a file the process may not write would bypass its
	// permission bits: rename needs only the directory's.
	if err := unix.Faccessat(d.fd, base, unix.W_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		c.close()
		return nil, fsError(op, p, err)
	}
	return c, nil
}

type commitResult struct {
	sha256        string
	size          int64
	brokeHardLink bool
	// diff is set by a dry run.
	diff []byte
	// undo restores the replaced file, when a quarantine kept it.
	undo string
}

// commitOrPreview commits b in place of base, or with dryRun answers what
// the commit would produce (its sha256, size and diff) and changes nothing:
// no temp file is created, so neither the file nor its directory sees a
// write.
func (s *Service) commitOrPreview(ctx context.Context, d *parent, base, p string, cur *current, b *body, dryRun bool) (*commitResult, error) {
	if !dryRun {
		return s.commit(ctx, d, base, p, cur, b)
	}
	sum, err := b.sha256(ctx, cur, &s.hashes.Hashed)
	if err != nil {
		return nil, fsError("read", p, err)
	}
	diff, err := b.diff(ctx, p, cur)
	if err != nil {
		return nil, fsError("read", p, err)
	}
	return &commitResult{sha256: sum.Hex, size: b.size(cur), diff: diff}, nil
}

// commit writes b to a new temp file in d, gives it cur's metadata
// and inode flags (or newFileMode), fsyncs it, and puts it in place of base:
//
//   - over an existing file with renameat2(RENAME_EXCHANGE), then checks
//     that the inode it displaced is the one that was hashed and has not
//     been written since; if not, it exchanges back and fails with
//     precondition_failed, so another writer's file is never lost;
//   - for a new file with renameat2(RENAME_NOREPLACE), so a file created
//     meanwhile is never clobbered.
//
// The directory is fsynced after the rename. On any failure the temp file
// is removed and the target is as it was. fs_patch commits several files
// with the same two steps, stage and place (see commitAll). With a
// quarantine, the replaced file is renamed into it instead of unlinked, or
// the write is undone.
func (s *Service) commit(ctx context.Context, d *parent, base, p string, cur *current, b *body) (_ *commitResult, rerr error) {
	if cur.exists && !s.quarantine.sameFS(d.st.Dev) {
		return nil, errOtherFS("write", p)
	}
	st, err := s.stage(ctx, d, p, cur, b)
	if err != nil {
		return nil, err
	}
	placed := false
	defer func() {
		if !placed {
			rerr = st.discardReport(p, rerr)
		}
	}()
	sum, err := b.sha256(ctx, cur, &s.hashes.Hashed)
	if err != nil {
		return nil, fsError("read", p, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fsError("write", p, err)
	}
	if s.beforeCommit != nil {
		s.beforeCommit(p)
	}
	res := &commitResult{sha256: sum.Hex, size: b.size(cur)}
	if res.brokeHardLink, err = s.place(ctx, st, base, p, cur); err != nil {
		if st.kept {
			placed = true
			st.f.Close()
		}
		return nil, err
	}
	placed, st.placed = true, true
	// The new file as placed: the hash cache keeps its sum and state
	// under this key (see putPlaced), so that the next precondition on it,
	// or an append to it, reads none of it again.
	now, nowErr := fstat(st.f)
	if err := unix.Fsync(d.fd); err != nil {
		// the old file, if any, is under the temp name
		return nil, st.discardReport(p, fsError("fsync directory", p, err))
	}
	// The temp name holds the old file now (or nothing, for a new file);
	// its other links keep the old content.
	if s.quarantine != nil && cur.exists {
		// On failure the exchange is reversed: the temp name holds the
		// new file, which discardReport removes.
		if res.undo, err = s.keepDisplaced(d, st.tmp, base, p, st.f, cur.sha, res.sha256); err != nil {
			st.placed = false
			return nil, st.discardReport(p, err)
		}
		st.f.Close()
	} else if err := st.discardReport(p, nil); err != nil {
		return nil, err
	}
	if nowErr == nil {
		s.hashes.PutPlaced(st.stat, now, sum)
	}
	return res, nil
}

// staged is a complete new file under a temp name in d, not yet in place.
type staged struct {
	d   *parent
	tmp string
	f   *os.File
	// ino is the new file's inode, by which a journal recognises it.
	ino uint64
	// stat is its fstat after its last write and fsync.
	stat *unix.Stat_t
	// kept: a failed place left both files in the directory (our file in
	// place, the other under tmp), which must not be removed.
	kept bool
	// placed: the new file is at its name, and tmp holds the old one.
	placed bool
}

// discard closes the staged file and removes whatever its temp name holds:
// the new file before place, the displaced old file after it. It reports
// nothing; discardReport does.
func (st *staged) discard() {
	st.f.Close()
	unix.Unlinkat(st.d.fd, st.tmp, 0)
}

// discardReport is discard for a single-file commit. err is the call's
// outcome so far, which discardReport returns, amended if the temp name
// could not be removed (EPERM: the directory became append-only or
// immutable): a temp file of new content is then truncated and the reply
// names it; an old file (which may have other links) is kept whole and
// the worker's log, and a failing reply, say where. Nothing is left
// unreported.
func (st *staged) discardReport(p string, err error) error {
	defer st.f.Close()
	uerr := unix.Unlinkat(st.d.fd, st.tmp, 0)
	if uerr == nil || errors.Is(uerr, unix.ENOENT) {
		return err
	}
	var e *Error
	if err != nil && !errors.As(err, &e) {
		e = fsError("write", p, err)
	}
	if st.placed {
		fmt.Fprintf(os.Stderr, "fsmcp worker: write: the old file, renamed to %s, could not be removed: %s\n", st.tmp, errnoText(uerr))
		if err == nil {
			return nil
		}
		out := *e
		out.Message = fmt.Sprintf("%s; the new content is in place and the old file is left as %s (%s)", e.Message, st.tmp, errnoText(uerr))
		return &out
	}
	what := "emptied"
	if terr := st.f.Truncate(0); terr != nil {
		what = "could not be emptied either"
	}
	if err == nil {
		// Not reached: a temp file of new content is discarded only on
		// failure. Say so rather than drop the report.
		bug(fmt.Errorf("discard of a temp file that was not placed, without an error"))
		e = newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, p, "write: the temp file was not placed")
	}
	out := *e
	out.Message = fmt.Sprintf("%s; the temp file %s could not be removed (%s) and was %s", e.Message, st.tmp, errnoText(uerr), what)
	return &out
}

// errnoText is the errno text of err, which holds no path.
func errnoText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "error"
}

// Inode flags of a directory whose entries cannot be renamed or removed.
const (
	fsImmutableFL = 0x00000010 // FS_IMMUTABLE_FL
	fsAppendFL    = 0x00000020 // FS_APPEND_FL
)

// stage writes b to a new temp file in d with cur's metadata and inode
// flags (or newFileMode), and fsyncs it.
func (s *Service) stage(ctx context.Context, d *parent, p string, cur *current, b *body) (_ *staged, rerr error) {
	// No entry of an append-only or immutable directory can be renamed or
	// removed: a temp file made there could neither take the target's
	// place nor go away.
	if flags, err := unix.IoctlGetUint32(d.fd, unix.FS_IOC_GETFLAGS); err == nil && flags&(fsAppendFL|fsImmutableFL) != 0 {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, p,
			"write: the directory is append-only or immutable (chattr +a, +i); nothing was written")
	}
	tmp, f, err := createTemp(d.fd)
	if err != nil {
		return nil, fsError("create temp file", p, err)
	}
	st := &staged{d: d, tmp: tmp, f: f}
	ok := false
	defer func() {
		if !ok {
			rerr = st.discardReport(p, rerr)
		}
	}()
	var meta *os.File
	switch {
	case b.meta != nil:
		meta = b.meta
	case cur.exists:
		meta = cur.f
	}
	if meta != nil {
		if err := copyFlags(p, meta, f); err != nil {
			return nil, err
		}
	}
	if err := b.fill(ctx, cur, f); err != nil {
		return nil, fsError("write", p, err)
	}
	if meta != nil {
		if err := copyMetadata(p, meta, f); err != nil {
			return nil, err
		}
	}
	if meta == nil || b.meta != nil && b.mode != 0 {
		if err := unix.Fchmod(int(f.Fd()), cmp.Or(b.mode, newFileMode)); err != nil {
			return nil, fsError("chmod", p, err)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, fsError("fsync", p, err)
	}
	fst, err := fstat(f)
	if err != nil {
		return nil, fsError("fstat", p, err)
	}
	st.ino, st.stat = fst.Ino, fst
	ok = true
	return st, nil
}

// place puts the staged file at base: over cur with RENAME_EXCHANGE and
// the displaced-inode check, or, when cur does not exist, with
// RENAME_NOREPLACE. On success the temp name holds the old file (or
// nothing); on failure base is as it was. It reports whether the old file
// had other hard links.
func (s *Service) place(ctx context.Context, st *staged, base, p string, cur *current) (bool, error) {
	d, tmp := st.d, st.tmp
	if !cur.exists {
		if err := fileio.RenameNoReplace(d.fd, tmp, d.fd, base); err != nil {
			if errors.Is(err, unix.EEXIST) {
				e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "a file was created at the path meanwhile; nothing was written")
				e.CurrentSHA256 = s.hashName(ctx, d, base)
				return false, e
			}
			return false, fsError("rename", p, err)
		}
		return false, nil
	}
	// The file as hashed must still be the file: an in-place writer
	// changes its ctime (and usually mtime and size) even when it restores
	// the mtime, as cp -p and rsync -t do. ctime is compared here, before
	// the rename, because the rename itself changes the displaced inode's
	// ctime; after it, inode, size and mtime are compared again.
	if now, err := fstat(cur.f); err != nil {
		return false, fsError("fstat", p, err)
	} else if now.Ctim != cur.st.Ctim || now.Mtim != cur.st.Mtim || now.Size != cur.st.Size {
		e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the file changed during the write; nothing was written")
		e.CurrentSHA256 = s.hashName(ctx, d, base)
		return false, e
	}
	if err := unix.Renameat2(d.fd, tmp, d.fd, base, unix.RENAME_EXCHANGE); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return false, newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, p, "the filesystem cannot exchange two files atomically")
		}
		return false, fsError("rename", p, err)
	}
	// The temp name now holds whatever was at base.
	displaced, err := fileio.Lstatat(d.fd, tmp)
	now, ferr := fstat(cur.f)
	if err != nil || ferr != nil || !sameInode(displaced, cur.st) ||
		now.Mtim != cur.st.Mtim || now.Size != cur.st.Size {
		if xerr := unix.Renameat2(d.fd, tmp, d.fd, base, unix.RENAME_EXCHANGE); xerr != nil {
			// Our file stays in place and the other one under the temp
			// name: keep both rather than remove either.
			st.kept = true
			bug(fmt.Errorf("exchange back after a lost race: %w", xerr))
			return false, newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, p, "the file changed during the write and could not be restored")
		}
		e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "the file changed during the write; nothing was written")
		e.CurrentSHA256 = s.hashName(ctx, d, base)
		return false, e
	}
	return displaced.Nlink > 1, nil
}

// hashName hashes the regular file base in d, for a precondition_failed
// report; "" when there is none.
func (s *Service) hashName(ctx context.Context, d *parent, base string) string {
	c, err := s.current(ctx, "hash", d, base, base, false)
	if err != nil {
		return ""
	}
	defer c.close()
	return c.sha
}

// createTemp creates an empty file with a fresh temp name in dirfd,
// O_EXCL and O_NOFOLLOW, readable by its owner only until its metadata is
// set.
func createTemp(dirfd int) (string, *os.File, error) {
	for range 16 {
		name := tempName()
		fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		return name, os.NewFile(uintptr(fd), name), nil
	}
	return "", nil, unix.EEXIST
}

// tempName returns a fresh random name with the temp prefix.
func tempName() string {
	var b [12]byte
	rand.Read(b[:])
	return tempPrefix + hex.EncodeToString(b[:])
}
