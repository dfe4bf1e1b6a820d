package worker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// A patch commits several files all or none, also across a crash:
//
//  1. every new file is staged under a temp name beside its target and
//     fsynced (stage);
//  2. a journal naming each target, its temp name, and the inode, size
//     and sha256 of the old and the staged file is written to the state
//     directory outside the root (recover.go), fsynced, renamed to its
//     final name, and the state directory fsynced;
//  3. the files are placed in the fixed order (place: RENAME_EXCHANGE with
//     the displaced-inode check; RENAME_NOREPLACE for a created file; a
//     deleted file renamed aside), and if one fails, those already placed
//     are undone in reverse;
//  4. with a quarantine, the old versions (now under the temp names) are
//     renamed into it, to the names the journal gave them; then the
//     directories the deletions left empty are removed (the directories
//     for created files were made before step 3; both are in the journal);
//  5. every directory is fsynced, and removing the journal (then fsyncing
//     the state directory) is the commit;
//  6. the old versions still under the temp names are removed; with a
//     quarantine, the kept ones become one entry, undone by one token.
//
// A journal found at start-up (recoverJournals, before the first RPC) means the
// commit did not happen: once it verifies (recover.go), each entry is
// undone by what its inodes show, so the files are all as they were. The
// inode numbers tell an entry's state
// without trusting timing: the staged file's inode at the target means it
// was placed; the old inode under its quarantine name means it was placed
// and kept, and it comes back from there. So a crash never leaves an old
// version both gone from the root and not in the quarantine.

type journal struct {
	// RootDev and RootIno are the root's device and inode: a journal
	// applies to that root only.
	RootDev uint64         `json:"root_dev"`
	RootIno uint64         `json:"root_ino"`
	Entries []journalEntry `json:"entries"`
	// QDev and QIno are the quarantine's device and inode when entries
	// keep their old versions there; recovery needs the same directory.
	QDev uint64 `json:"q_dev,omitempty"`
	QIno uint64 `json:"q_ino,omitempty"`
}

// journalEntry is one file of a patch. Names are bytes (base64 in the
// JSON), as a name need not be UTF-8.
type journalEntry struct {
	// Dir is the real root-relative path of the file's directory, "" for
	// the root.
	Dir  []byte `json:"dir"`
	Name []byte `json:"name"`
	Tmp  []byte `json:"tmp"`
	// Kind is "replace", "create", "delete" or "cut" (the file, the same
	// inode, cut back to NewSize in place, the bytes past it kept under
	// Q; NewIno is OldIno).
	Kind string `json:"kind"`
	// NewIno, NewSize and NewSHA are the staged file's inode, size and
	// sha256 (not for delete); OldIno, OldSize and OldSHA the current
	// file's (not for create).
	NewIno  uint64 `json:"new_ino,omitempty"`
	NewSize int64  `json:"new_size,omitempty"`
	NewSHA  string `json:"new_sha256,omitempty"`
	OldIno  uint64 `json:"old_ino,omitempty"`
	OldSize int64  `json:"old_size,omitempty"`
	OldSHA  string `json:"old_sha256,omitempty"`
	// Q is the old version's name in the quarantine, with one (not for
	// create).
	Q []byte `json:"q,omitempty"`
	// TmpDir is the real root-relative path of the directory Tmp is in
	// ("." for the root), when that is not Dir: a file created in
	// directories the patch makes is staged in the nearest one that
	// exists; a file deleted from a directory the patch removes moves
	// aside to the nearest one it keeps.
	TmpDir []byte `json:"tmp_dir,omitempty"`
	// Mode is an "rmdir" entry's permission bits. A "mkdir" entry is a
	// directory Name in Dir that the patch makes for a created file, an
	// "rmdir" one it removes because its deletions leave it empty.
	Mode uint32 `json:"mode,omitempty"`
}

func (f *patchFile) entry() journalEntry {
	e := journalEntry{Dir: []byte(f.dirRel), Name: []byte(f.base), Tmp: []byte(f.tmp)}
	if f.td.rel != f.dirRel {
		e.TmpDir = []byte(cmp.Or(f.td.rel, "."))
	}
	if !f.delete {
		sum := sha256.Sum256(f.data)
		e.NewSize, e.NewSHA = int64(len(f.data)), hex.EncodeToString(sum[:])
	}
	if f.st != nil {
		e.NewIno = f.st.ino
	}
	if f.cur.exists {
		e.OldIno, e.OldSize, e.OldSHA = f.cur.st.Ino, f.cur.st.Size, f.cur.sha
	}
	switch {
	case f.delete:
		e.Kind = "delete"
	case f.cut:
		e.Kind, e.NewIno = "cut", f.cur.st.Ino
	case f.cur.exists:
		e.Kind = "replace"
	default:
		e.Kind = "create"
	}
	return e
}

// commitAll commits the files of a patch, all or none (see above), with
// the directories it makes for created files (before placing them) and
// the emptied ones it removes (after). With a quarantine it returns the
// token that undoes the whole patch ("" when what it kept exceeded the
// bound).
func (s *Service) commitAll(ctx context.Context, files []*patchFile, emptied []*parent) (token string, err error) {
	defer func() {
		if err != nil {
			for _, f := range files {
				// kept: a failed exchange left another writer's file
				// under the temp name, which must stay.
				if f.st != nil && !f.st.kept {
					f.st.discard()
				}
			}
		}
	}()
	for _, f := range files {
		if f.delete {
			f.tmp = tempName()
			continue
		}
		if f.cut {
			continue // nothing staged: cut in place
		}
		if f.st, err = s.stage(ctx, f.d, f.path, f.cur, &body{data: f.data, mode: f.mode, meta: f.meta}); err != nil {
			return "", err
		}
		f.tmp = f.st.tmp
	}
	if err := ctx.Err(); err != nil {
		return "", fsError("patch", "", err)
	}
	if s.state == nil {
		return "", errNoState
	}
	stateFD := int(s.state.Fd())
	q, qfd := s.quarantine, -1
	j := &journal{RootDev: s.rootDev, RootIno: s.rootIno}
	if q != nil {
		qfd, j.QDev, j.QIno = q.fd, q.dev, q.ino
	}
	// Undone in reverse: removed directories come back before the files
	// deleted from them, and made ones go after the files created in them.
	made := dirsToMake(files)
	for _, rel := range made {
		j.Entries = append(j.Entries, journalEntry{Dir: []byte(relDir(rel)), Name: []byte(path.Base(rel)), Kind: "mkdir"})
	}
	for _, f := range files {
		e := f.entry()
		if q != nil && e.Kind != "create" {
			f.qname = q.newName()
			e.Q = []byte(f.qname)
		}
		j.Entries = append(j.Entries, e)
	}
	for _, d := range emptied {
		j.Entries = append(j.Entries, journalEntry{Dir: []byte(relDir(d.rel)), Name: []byte(path.Base(d.rel)), Kind: "rmdir", Mode: d.st.Mode & 0o7777})
	}
	jname, err := writeJournal(stateFD, j)
	if err != nil {
		return "", fsError("write the patch journal", "", err)
	}
	undoAll := func(err error) error {
		s.undoJournal(j, qfd, func(where string, uerr error) {
			bug(fmt.Errorf("undo %q after a failed patch: %w", where, uerr))
		})
		unix.Unlinkat(stateFD, jname, 0)
		return err
	}
	if s.beforeCommit != nil {
		for _, f := range files {
			s.beforeCommit(f.path)
		}
	}
	// From here to the journal's removal the commit does not look at ctx:
	// stopping half way would only mean undoing.
	var synced []int
	for _, rel := range made {
		up, err := s.openRel(relDir(rel))
		if err == nil {
			defer up.Close()
			synced = append(synced, int(up.Fd()))
			err = unix.Mkdirat(int(up.Fd()), path.Base(rel), newDirMode)
			if errors.Is(err, unix.EEXIST) {
				// Made meanwhile by someone else: used, as git apply would.
				err = nil
			}
		}
		if err != nil {
			return "", undoAll(fsError("mkdir", rel, err))
		}
	}
	for _, f := range files {
		if len(f.mkdirs) > 0 {
			d, err := s.openDir("patch", f.path, f.dirRel)
			if err != nil {
				return "", undoAll(err)
			}
			defer d.close()
			f.d = d
		}
	}
	for _, f := range files {
		switch {
		case f.delete:
			err = s.placeDeletion(f)
		case f.cut:
			err = s.cutTail(f, qfd)
		case len(f.mkdirs) > 0:
			if err = renameNoReplace(f.td.fd, f.tmp, f.d.fd, f.base); errors.Is(err, unix.EEXIST) {
				err = newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, f.path, "a file was created at the path meanwhile; nothing was written")
			} else if err != nil {
				err = fsError("rename", f.path, err)
			}
		default:
			f.brokeHardLink, err = s.place(ctx, f.st, f.base, f.path, f.cur)
		}
		if err != nil {
			return "", undoAll(err)
		}
	}
	// The old versions go into the quarantine before the commit, so that
	// recovery finds them there if it comes to undo the patch.
	for _, f := range files {
		if f.qname == "" || f.cut {
			continue
		}
		if err := renameNoReplace(f.td.fd, f.tmp, qfd, f.qname); err != nil {
			return "", undoAll(fsError("quarantine", f.path, err))
		}
	}
	// A directory that is no longer empty (something was made in it
	// meanwhile) stays, as git apply would leave it.
	for _, d := range emptied {
		up, err := s.openRel(relDir(d.rel))
		if err == nil {
			defer up.Close()
			synced = append(synced, int(up.Fd()))
			err = unix.Unlinkat(int(up.Fd()), path.Base(d.rel), unix.AT_REMOVEDIR)
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				err = nil
			}
		}
		if err != nil {
			return "", undoAll(fsError("rmdir", d.rel, err))
		}
	}
	for _, f := range files {
		synced = append(synced, f.d.fd, f.td.fd)
	}
	for _, fd := range synced {
		if err := unix.Fsync(fd); err != nil {
			return "", undoAll(fsError("fsync directory", "", err))
		}
	}
	if q != nil {
		if err := unix.Fsync(qfd); err != nil {
			return "", undoAll(fsError("fsync the quarantine", "", err))
		}
	}
	// What the tools left, recorded before the commit: a crash after
	// this leaves a journal, whose recovery records the old state again.
	s.touchCommit(files, made, emptied)
	// The commit.
	if err := unix.Unlinkat(stateFD, jname, 0); err != nil {
		return "", undoAll(fsError("remove the patch journal", "", err))
	}
	unix.Fsync(stateFD)
	if q != nil {
		token = q.register(patchEntry(files))
	}
	// The temp names hold the old versions now (or nothing, for a file
	// created or an old version kept).
	for _, f := range files {
		if f.st != nil {
			f.st.discard()
			f.st = nil
		} else if !f.cut {
			unix.Unlinkat(f.td.fd, f.tmp, 0)
		}
	}
	return token, nil
}

// dirsToMake lists the directories the patch makes for its created files,
// each once, every one after its parent.
func dirsToMake(files []*patchFile) []string {
	seen := map[string]bool{}
	var made []string
	for _, f := range files {
		rel := f.d.rel
		for _, m := range f.mkdirs {
			rel = joinRel(rel, m)
			if !seen[rel] {
				seen[rel] = true
				made = append(made, rel)
			}
		}
	}
	return made
}

// patchEntry is the quarantine entry of a committed patch: each file's old
// version is kept (a replaced or deleted file) or nothing is (a created
// file, which an undo takes away), and an undo needs every new version
// unchanged.
func patchEntry(files []*patchFile) *qEntry {
	e := &qEntry{}
	for _, f := range files {
		part := qPart{name: f.qname, path: joinRel(f.d.rel, f.base), parentDev: f.d.st.Dev, parentIno: f.d.st.Ino, base: f.base}
		if f.cur.exists {
			part.keptSHA = f.cur.sha
			e.bytes += f.cur.st.Size
		}
		if f.st != nil {
			sum := sha256.Sum256(f.data)
			part.nowSHA = hex.EncodeToString(sum[:])
			if st, err := fstat(f.st.f); err == nil {
				part.now = idOf(st)
			}
		}
		switch {
		case f.cut:
			part.kind, part.oldSize, part.keptSHA = partUncut, int64(len(f.data)), f.cur.sha
			e.bytes -= part.oldSize // only the bytes cut are kept
			sum := sha256.Sum256(f.data)
			part.nowSHA = hex.EncodeToString(sum[:])
			if st, err := fstatat(f.d.fd, f.base); err == nil {
				part.now = idOf(st)
			}
		case f.delete:
			// A deleted file whose directory the patch removed was moved
			// aside to a directory it kept (emptiedDirs).
			part.kind, part.gone = partRestore, f.td.rel != f.dirRel
		case f.cur.exists:
			part.kind = partSwap
		default:
			part.kind = partTake
		}
		e.parts = append(e.parts, part)
	}
	return e
}

// writeJournal writes j as a new journal in the state directory stateFD
// and makes it durable: it is written under a partial name and renamed to
// its final one once fsynced, so a journal under a final name is always
// whole.
func writeJournal(stateFD int, j *journal) (string, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	b = append([]byte(journalMagic+hex.EncodeToString(sum[:])+"\n"), b...)
	id := strings.TrimPrefix(tempName(), tempPrefix)
	partial, name := journalPartial+id, journalName+id
	fd, err := unix.Openat(stateFD, partial, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), partial)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err == nil {
		err = renameNoReplace(stateFD, partial, stateFD, name)
	}
	if err == nil {
		if err = unix.Fsync(stateFD); err != nil {
			unix.Unlinkat(stateFD, name, 0)
		}
	}
	if err != nil {
		unix.Unlinkat(stateFD, partial, 0)
		return "", err
	}
	return name, nil
}

// undoEntry puts one entry's file back as it was before the patch, judged
// by the inodes its names hold now: an old version kept in the quarantine
// (qfd, -1 for none) first comes back to its temp name (in tmpfd, which is
// dirfd unless the entry names a TmpDir); then a placed file is exchanged
// back (or, created, renamed back to its temp name; deleted, renamed back
// to its name); one not placed is left. What matches no state was changed
// by someone else since, and is left alone (an error says so). A made
// directory is removed if it is empty; a removed one is made again, with
// its mode, unless it is there.
func undoEntry(dirfd, tmpfd, qfd int, e journalEntry) error {
	name, tmp := string(e.Name), string(e.Tmp)
	switch e.Kind {
	case "cut":
		return undoCut(dirfd, qfd, e)
	case "mkdir":
		if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return nil
	case "rmdir":
		err := unix.Mkdirat(dirfd, name, e.Mode)
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		if err != nil {
			return err
		}
		return unix.Fchmodat(dirfd, name, e.Mode, 0)
	}
	side, serr := fstatat(tmpfd, tmp)
	if len(e.Q) > 0 && qfd >= 0 && errors.Is(serr, unix.ENOENT) {
		if kept, err := fstatat(qfd, string(e.Q)); err == nil && kept.Ino == e.OldIno {
			if err := renameNoReplace(qfd, string(e.Q), tmpfd, tmp); err != nil {
				return err
			}
			side, serr = fstatat(tmpfd, tmp)
		}
	}
	at, aerr := fstatat(dirfd, name)
	placedNew := aerr == nil && at.Ino == e.NewIno
	switch e.Kind {
	case "replace":
		switch {
		case placedNew && serr == nil && side.Ino == e.OldIno:
			return unix.Renameat2(tmpfd, tmp, dirfd, name, unix.RENAME_EXCHANGE)
		case aerr == nil && at.Ino == e.OldIno:
			return nil
		}
	case "create":
		switch {
		case placedNew && errors.Is(serr, unix.ENOENT):
			return unix.Renameat2(dirfd, name, tmpfd, tmp, unix.RENAME_NOREPLACE)
		case !placedNew:
			return nil
		}
	case "delete":
		switch {
		case errors.Is(aerr, unix.ENOENT) && serr == nil && side.Ino == e.OldIno:
			return unix.Renameat2(tmpfd, tmp, dirfd, name, unix.RENAME_NOREPLACE)
		case aerr == nil && at.Ino == e.OldIno:
			return nil
		}
	}
	return fmt.Errorf("%s: changed since the interrupted patch; left as it is", e.Kind)
}

// undoJournal undoes j's entries in reverse, each in the directories its
// paths name now, and removes a staged file still under its temp name; it
// reports what it could not undo. A created file whose directory was never
// made was not placed.
func (s *Service) undoJournal(j *journal, qfd int, report func(where string, err error)) {
	for k := len(j.Entries) - 1; k >= 0; k-- {
		e := j.Entries[k]
		if err := s.undoJournalEntry(e, qfd); err != nil {
			report(joinRel(string(e.Dir), string(e.Name)), err)
		}
	}
}

func (s *Service) undoJournalEntry(e journalEntry, qfd int) error {
	d, err := s.openRel(string(e.Dir))
	if errors.Is(err, unix.ENOENT) && (e.Kind == "create" || e.Kind == "mkdir") {
		// Never made: nothing was placed in it.
		d, err = nil, nil
	}
	if err != nil {
		return err
	}
	if d != nil {
		defer d.Close()
	}
	td := d
	if len(e.TmpDir) > 0 {
		if td, err = s.openRel(string(e.TmpDir)); err != nil {
			return err
		}
		defer td.Close()
	}
	if d != nil {
		err = undoEntry(int(d.Fd()), int(td.Fd()), qfd, e)
		unix.Fsync(int(d.Fd()))
	}
	// The staged file, if it is still ours, goes now; the sweep would
	// take it too.
	if td != nil && e.NewIno != 0 {
		if st, serr := fstatat(int(td.Fd()), string(e.Tmp)); serr == nil && st.Ino == e.NewIno {
			unix.Unlinkat(int(td.Fd()), string(e.Tmp), 0)
		}
		unix.Fsync(int(td.Fd()))
	}
	return err
}

// openRel opens the directory at the real root-relative path rel ("" or
// "." for the root).
func (s *Service) openRel(rel string) (*os.File, error) {
	return s.root.OpenFile(cmp.Or(rel, "."), os.O_RDONLY|unix.O_DIRECTORY, 0)
}
