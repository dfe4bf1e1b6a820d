package worker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/patchlog"
	"golang.org/x/sys/unix"
)

// Recovery reads nothing the agent can write. The journals live in the
// state directory (--state-dir, one subdirectory per root identity),
// outside the root and granted to the worker alone; a journal is used
// only once it verifies:
//
//   - it is whole (the header's sha256 matches its JSON) and names this
//     root's device and inode;
//   - every name it gives is judged by the resolver and the policy of
//     this start, as a live fs_patch of that name would be: a protected,
//     denied or --rules-denied name, a directory that is not where the
//     journal says, or a name that is not a temp or quarantine name where
//     one is expected, all refuse it;
//   - every file recovery would move back (under a temp name in the root
//     or in the quarantine, holding the journal's inode) has the size and
//     sha256 the journal gives for that inode.
//
// One that does not verify is set aside (moved to set-aside/ in the
// state directory, kept for the operator), named in one stderr line and
// reported to the front-end, which writes an audit record; start-up goes
// on. One that verifies but cannot complete, as the quarantine its old
// versions went to is not this start's, refuses the start unless
// --discard-journal names it. A journal an earlier version wrote into the
// root (legacyJournalPrefix) is never read: it is moved out of the root
// into set-aside/ and named.

const (
	// setAsideDir, in the state directory, keeps the journals recovery
	// did not use.
	setAsideDir = "set-aside"
	// legacyJournalPrefix started the name of a journal that earlier
	// versions wrote into the root.
	legacyJournalPrefix = tempPrefix + "journal-"
	// maxJournalBytes bounds a journal read back at start-up.
	maxJournalBytes = 16 << 20
)

// errNoState refuses a patch in a worker given no state directory.
var errNoState = newError(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "", "patch: no state directory for its journal")

// errJournalReadOnly refuses a read-only start while a patch awaits its
// undoing.
var errJournalReadOnly = newError(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "",
	"an interrupted fs_patch awaits recovery, which needs write access: start fsmcp once without --read-only")

// errJournalQuarantine marks a journal that verifies but needs a
// quarantine this start does not have.
var errJournalQuarantine = errors.New("its old versions are in a --quarantine this start does not have")

// SetAside is a journal recovery did not use.
type SetAside struct {
	// Name is where it is kept, relative to the state directory.
	Name string
	// Reason says why it was not used.
	Reason string
}

// Recovery is what recoverJournals did.
type Recovery struct {
	// Undone counts the interrupted patches undone.
	Undone   int
	SetAside []SetAside
}

// recoverJournals undoes the patches a crash interrupted, from the journals in
// the state directory, so that every file is as it was before that patch;
// the staged files it leaves under temp names are removed. It runs at
// start-up, before the first RPC is served. An entry whose directory is
// gone is reported and left as it is. A journal that verifies but whose
// quarantine this start lacks refuses the start (an error naming it and
// --discard-journal) unless discard is its name: it is then set aside.
func (s *Service) recoverJournals(discard string) (*Recovery, error) {
	r := &Recovery{}
	legacy, err := s.legacyJournals()
	if err != nil {
		return r, err
	}
	for _, n := range legacy {
		r.setAside(s.setAsideLegacy(n, s.state != nil))
	}
	if s.state == nil {
		return r, nil
	}
	// A partial journal was cut short before any file was placed.
	partial, err := namesWith(int(s.state.Fd()), patchlog.Partial)
	if err != nil {
		return r, err
	}
	for _, n := range partial {
		unix.Unlinkat(int(s.state.Fd()), n, 0)
	}
	names, err := s.journals()
	if err != nil {
		return r, err
	}
	for _, jn := range names {
		undone, err := s.recoverOne(jn, discard)
		var na *notApplied
		switch {
		case errors.As(err, &na):
			r.setAside(s.setAsideJournal(jn, na.reason))
		case errors.Is(err, errJournalQuarantine):
			return r, fmt.Errorf("journal %s of an interrupted fs_patch: %w: start fsmcp with the --quarantine it ran with to undo it, or with --discard-journal %s to set it aside and start (its files stay as the crash left them)",
				s.statePath(jn), err, jn)
		case err != nil:
			return r, err
		case undone:
			r.Undone++
		default:
			r.setAside(s.setAsideJournal(jn, "discarded by --discard-journal"))
		}
	}
	if err := s.recoverAppends(); err != nil {
		return r, err
	}
	if s.quarantine != nil {
		s.quarantine.settle()
	}
	return r, nil
}

// setAside records a journal set aside, and names it in one stderr line.
func (r *Recovery) setAside(a SetAside) {
	fmt.Fprintf(os.Stderr, "fsmcp worker: journal set aside, not replayed: %s: %s\n", a.Name, a.Reason)
	r.SetAside = append(r.SetAside, a)
}

// notApplied is why a journal does not verify.
type notApplied struct{ reason string }

func (e *notApplied) Error() string { return e.reason }

func refuse(format string, args ...any) error {
	return &notApplied{fmt.Sprintf(format, args...)}
}

// checkReadOnly is recoverJournals for a read-only start, which may change
// nothing: a journal in the state directory refuses the start
// (errJournalReadOnly); a journal an earlier version left in the root is
// named and left there.
func (s *Service) checkReadOnly() (*Recovery, error) {
	r := &Recovery{}
	if s.state != nil {
		if js, err := s.journals(); err != nil || len(js) > 0 {
			return r, errJournalReadOnly
		}
	}
	legacy, err := s.legacyJournals()
	for _, n := range legacy {
		r.setAside(s.setAsideLegacy(n, false))
	}
	return r, err
}

// journals lists the names of the journals in the state directory.
func (s *Service) journals() ([]string, error) {
	return namesWith(int(s.state.Fd()), patchlog.Name)
}

// legacyJournals lists the journals earlier versions wrote into the root.
func (s *Service) legacyJournals() ([]string, error) {
	root, err := s.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return namesWith(int(root.Fd()), legacyJournalPrefix)
}

// namesWith lists, sorted, the names in the directory dirfd that start
// with prefix.
func namesWith(dirfd int, prefix string) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var names []string
	err = readNames(context.Background(), fd, func(n []byte) error {
		if bytes.HasPrefix(n, []byte(prefix)) {
			names = append(names, string(n))
		}
		return nil
	})
	slices.Sort(names)
	return names, err
}

// statePath is name in the state directory, as the operator knows it.
func (s *Service) statePath(name string) string {
	return s.state.Name() + "/" + name
}

// recoverOne verifies the journal jn and undoes its patch, then removes
// it. It reports false, having done nothing, when jn cannot complete and
// discard names it; it returns a *notApplied when jn does not verify.
func (s *Service) recoverOne(jn, discard string) (bool, error) {
	j, err := s.loadJournal(jn)
	if err != nil {
		return false, err
	}
	// Recovery runs before the first RPC: no call renames meanwhile.
	unlock := s.lockRenames(false)
	defer unlock()
	dirs, err := s.verifyNames(j)
	defer func() {
		for _, d := range dirs {
			if d != nil {
				d.close()
			}
		}
	}()
	if err != nil {
		return false, err
	}
	qfd := -1
	if j.QIno != 0 {
		if q := s.quarantine; q == nil || q.dev != j.QDev || q.ino != j.QIno {
			if discard == jn {
				return false, nil
			}
			return false, errJournalQuarantine
		}
		qfd = s.quarantine.fd
	}
	if err := s.verifyFiles(j, dirs, qfd); err != nil {
		return false, err
	}
	// Undone in reverse through the paths the entries name (a directory
	// the patch removed is made again before the files deleted from it).
	s.undoJournal(j, qfd, func(where string, err error) {
		fmt.Fprintf(os.Stderr, "fsmcp worker: interrupted patch: %q: %v; left as it is\n", where, err)
	})
	if s.quarantine != nil {
		unix.Fsync(s.quarantine.fd)
	}
	s.touchJournal(j)
	if err := unix.Unlinkat(int(s.state.Fd()), jn, 0); err != nil {
		return false, err
	}
	return true, unix.Fsync(int(s.state.Fd()))
}

// loadJournal reads and parses the journal jn: whole, for this root.
func (s *Service) loadJournal(jn string) (*patchlog.Journal, error) {
	fd, err := unix.Openat(int(s.state.Fd()), jn, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refuse("cannot open it: %v", err)
	}
	f := os.NewFile(uintptr(fd), jn)
	defer f.Close()
	if st, err := fstat(f); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, refuse("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxJournalBytes+1))
	if err != nil {
		return nil, refuse("cannot read it: %v", err)
	}
	if len(b) > maxJournalBytes {
		return nil, refuse("larger than %d bytes", maxJournalBytes)
	}
	header, body, ok := bytes.Cut(b, []byte("\n"))
	sum := sha256.Sum256(body)
	if !ok || string(header) != patchlog.Magic+hex.EncodeToString(sum[:]) {
		return nil, refuse("its header or sha256 does not match its content")
	}
	var j patchlog.Journal
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, refuse("not a journal: %v", err)
	}
	if j.RootDev != s.rootDev || j.RootIno != s.rootIno {
		return nil, refuse("written for another root (device %d, inode %d)", j.RootDev, j.RootIno)
	}
	return &j, nil
}

// verifyNames judges every name of j as a live fs_patch of it would be
// judged, and opens each entry's directory (nil where it is gone).
func (s *Service) verifyNames(j *patchlog.Journal) ([]*parent, error) {
	cr := &callRules{tool: "fs_patch", policy: s.policy}
	if s.rules != nil {
		cr = s.newCallRules("fs_patch")
	}
	ctx := context.WithValue(context.Background(), callRulesKey{}, cr)
	dirs := make([]*parent, len(j.Entries))
	for k, e := range j.Entries {
		name, tmp, q := string(e.Name), string(e.Tmp), string(e.Q)
		p := joinRel(string(e.Dir), name)
		dirKind := e.Kind == "mkdir" || e.Kind == "rmdir"
		switch {
		case e.Kind != "replace" && e.Kind != "create" && e.Kind != "delete" && e.Kind != "cut" && !dirKind:
			return dirs, refuse("entry %d: unknown kind %q", k, e.Kind)
		case name == "" || name == "." || name == ".." || strings.Contains(name, "/"):
			return dirs, refuse("%q: %q is not one name", p, name)
		case dirKind && (tmp != "" || q != "" || e.NewIno != 0 || e.OldIno != 0 || len(e.TmpDir) > 0):
			return dirs, refuse("%q: a %s entry names a file", p, e.Kind)
		case dirKind:
		case e.Kind == "cut" && (tmp != "" || q == "" || e.NewIno != e.OldIno || e.NewSize >= e.OldSize || len(e.TmpDir) > 0):
			return dirs, refuse("%q: a cut entry names a staged file, or no kept tail", p)
		case e.Kind != "cut" && (!isTempName(tmp) || strings.Contains(tmp, "/")):
			return dirs, refuse("%q: its staged name %q is not a temp name", p, tmp)
		case q != "" && (j.QIno == 0 || !strings.HasPrefix(q, qPrefix) || strings.Contains(q, "/")):
			return dirs, refuse("%q: its quarantine name %q is not one", p, q)
		case (e.Kind == "create") != (e.OldIno == 0) || (e.Kind == "delete") != (e.NewIno == 0):
			return dirs, refuse("%q: its inodes do not fit a %s", p, e.Kind)
		}
		d, _, err := s.openName(ctx, "patch", p, accessRewrite)
		var we *Error
		if errors.As(err, &we) && we.Code == fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND {
			continue
		}
		if err != nil {
			return dirs, refuse("%q: %v", p, err)
		}
		dirs[k] = d
		if d.rel != string(e.Dir) {
			return dirs, refuse("%q: its directory %q resolves to %q", p, e.Dir, d.rel)
		}
	}
	return dirs, nil
}

// verifyFiles checks every file recovery would move back, under an
// entry's temp name (in its directory, or the TmpDir it names, which must
// resolve to itself) or quarantine name: one holding the inode the journal
// gives for the staged or the old version must have that version's size
// and sha256. A file under such a name with another inode is not the
// patch's, and undoEntry leaves it.
func (s *Service) verifyFiles(j *patchlog.Journal, dirs []*parent, qfd int) error {
	for k, e := range j.Entries {
		d := dirs[k]
		if len(e.TmpDir) > 0 {
			p := joinRel(string(e.Dir), string(e.Name))
			td, err := s.openDir("patch", p, string(e.TmpDir))
			if err != nil {
				return refuse("%q: its temp directory %q: %v", p, e.TmpDir, err)
			}
			defer td.close()
			if cmp.Or(td.rel, ".") != string(e.TmpDir) {
				return refuse("%q: its temp directory %q resolves to %q", p, e.TmpDir, td.rel)
			}
			d = td
		}
		if d == nil || e.Tmp == nil {
			continue
		}
		where := []struct {
			fd   int
			name string
		}{{d.fd, string(e.Tmp)}}
		if len(e.Q) > 0 {
			where = append(where, struct {
				fd   int
				name string
			}{qfd, string(e.Q)})
		}
		for _, w := range where {
			st, err := fileio.Lstatat(w.fd, w.name)
			if err != nil {
				continue
			}
			size, sum := e.NewSize, e.NewSHA
			switch {
			case e.NewIno != 0 && st.Ino == e.NewIno:
			case e.OldIno != 0 && st.Ino == e.OldIno:
				size, sum = e.OldSize, e.OldSHA
			default:
				continue
			}
			if err := patchlog.FileMatches(w.fd, w.name, st.Ino, size, sum); err != nil {
				return refuse("%q: the staged file %q %v", joinRel(string(e.Dir), string(e.Name)), w.name, err)
			}
		}
	}
	return nil
}

// setAsideDirFD opens set-aside/ in the state directory, made if missing.
func (s *Service) setAsideDirFD() (int, error) {
	if err := unix.Mkdirat(int(s.state.Fd()), setAsideDir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	return unix.Openat(int(s.state.Fd()), setAsideDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// setAsideJournal moves the journal jn into set-aside/.
func (s *Service) setAsideJournal(jn, reason string) SetAside {
	a := SetAside{Name: setAsideDir + "/" + jn, Reason: reason}
	dfd, err := s.setAsideDirFD()
	if err == nil {
		err = fileio.RenameNoReplace(int(s.state.Fd()), jn, dfd, jn)
		unix.Fsync(dfd)
		unix.Close(dfd)
		unix.Fsync(int(s.state.Fd()))
	}
	if err != nil {
		a.Name = jn
		a.Reason += fmt.Sprintf(" (and it could not be moved to %s/: %v; it is ignored)", setAsideDir, err)
	}
	return a
}

// setAsideLegacy moves the journal name, which an earlier version wrote
// into the root, out of it into set-aside/ (as root-NAME), without reading
// it as a journal: by a rename, or a bounded copy when the state directory
// is on another filesystem. Unless move (a read-only start, or none
// without a state directory), it is left in the root and named.
func (s *Service) setAsideLegacy(name string, move bool) SetAside {
	reason := "written into the root by an earlier version, where the agent could have written it; never replayed"
	if !move {
		return SetAside{Name: "the root's " + name, Reason: reason + " (left in the root: this start may not move it)"}
	}
	a := SetAside{Name: setAsideDir + "/root-" + name, Reason: reason}
	root, err := s.root.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		a.Reason += fmt.Sprintf(" (left in the root: %v)", err)
		return a
	}
	defer root.Close()
	dfd, err := s.setAsideDirFD()
	if err == nil {
		err = fileio.RenameNoReplace(int(root.Fd()), name, dfd, "root-"+name)
		if errors.Is(err, unix.EXDEV) {
			err = fileio.MoveByCopy(int(root.Fd()), name, dfd, "root-"+name, maxJournalBytes)
		}
		unix.Fsync(dfd)
		unix.Close(dfd)
		unix.Fsync(int(root.Fd()))
	}
	if err != nil {
		a.Name = "the root's " + name
		a.Reason += fmt.Sprintf(" (it could not be moved out of the root: %v)", err)
	}
	return a
}
