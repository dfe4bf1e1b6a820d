package worker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/patchlog"
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

func (f *patchFile) entry() patchlog.Entry {
	e := patchlog.Entry{Dir: []byte(f.dirRel), Name: []byte(f.base), Tmp: []byte(f.tmp)}
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
	j := &patchlog.Journal{RootDev: s.rootDev, RootIno: s.rootIno}
	if q != nil {
		qfd, j.QDev, j.QIno = q.fd, q.dev, q.ino
	}
	// Undone in reverse: removed directories come back before the files
	// deleted from them, and made ones go after the files created in them.
	made := dirsToMake(files)
	for _, rel := range made {
		j.Entries = append(j.Entries, patchlog.Entry{Dir: []byte(relDir(rel)), Name: []byte(path.Base(rel)), Kind: "mkdir"})
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
		j.Entries = append(j.Entries, patchlog.Entry{Dir: []byte(relDir(d.rel)), Name: []byte(path.Base(d.rel)), Kind: "rmdir", Mode: d.st.Mode & 0o7777})
	}
	jname, err := patchlog.Write(stateFD, j)
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
			if err = fileio.RenameNoReplace(f.td.fd, f.tmp, f.d.fd, f.base); errors.Is(err, unix.EEXIST) {
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
		if err := fileio.RenameNoReplace(f.td.fd, f.tmp, qfd, f.qname); err != nil {
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
			if st, err := fileio.Lstatat(f.d.fd, f.base); err == nil {
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

// undoJournal undoes j's entries in reverse, each in the directories its
// paths name now, and removes a staged file still under its temp name; it
// reports what it could not undo. A created file whose directory was never
// made was not placed.
func (s *Service) undoJournal(j *patchlog.Journal, qfd int, report func(where string, err error)) {
	for k := len(j.Entries) - 1; k >= 0; k-- {
		e := j.Entries[k]
		if err := s.undoJournalEntry(e, qfd); err != nil {
			report(joinRel(string(e.Dir), string(e.Name)), err)
		}
	}
}

func (s *Service) undoJournalEntry(e patchlog.Entry, qfd int) error {
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
		err = patchlog.UndoEntry(int(d.Fd()), int(td.Fd()), qfd, e)
		unix.Fsync(int(d.Fd()))
	}
	// The staged file, if it is still ours, goes now; the sweep would
	// take it too.
	if td != nil && e.NewIno != 0 {
		if st, serr := fileio.Lstatat(int(td.Fd()), string(e.Tmp)); serr == nil && st.Ino == e.NewIno {
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
