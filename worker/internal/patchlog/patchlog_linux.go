package patchlog

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

const (
	// Name starts a journal's name in the state directory; Partial the
	// name it is written under before it is whole.
	Name    = "journal-"
	Partial = "partial-journal-"
	// Magic starts a journal, followed by the sha256 of the JSON after
	// the header line.
	Magic = "fsmcp-journal 1 "
)

// Journal is a patch's journal: what recovery needs to undo the patch
// if a crash comes before its commit (the journal's removal).
type Journal struct {
	// RootDev and RootIno are the root's device and inode: a journal
	// applies to that root only.
	RootDev uint64  `json:"root_dev"`
	RootIno uint64  `json:"root_ino"`
	Entries []Entry `json:"entries"`
	// QDev and QIno are the quarantine's device and inode when entries
	// keep their old versions there; recovery needs the same directory.
	QDev uint64 `json:"q_dev,omitempty"`
	QIno uint64 `json:"q_ino,omitempty"`
}

// Entry is one file of a patch. Names are bytes (base64 in the
// JSON), as a name need not be UTF-8.
type Entry struct {
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

// Write writes j as a new journal in the state directory stateFD
// and makes it durable: it is written under a partial name and renamed to
// its final one once fsynced, so a journal under a final name is always
// whole.
func Write(stateFD int, j *Journal) (string, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	b = append([]byte(Magic+hex.EncodeToString(sum[:])+"\n"), b...)
	var rnd [12]byte
	rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	partial, name := Partial+id, Name+id
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
		err = fileio.RenameNoReplace(stateFD, partial, stateFD, name)
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

// UndoEntry puts one entry's file back as it was before the patch, judged
// by the inodes its names hold now: an old version kept in the quarantine
// (qfd, -1 for none) first comes back to its temp name (in tmpfd, which is
// dirfd unless the entry names a TmpDir); then a placed file is exchanged
// back (or, created, renamed back to its temp name; deleted, renamed back
// to its name); one not placed is left. What matches no state was changed
// by someone else since, and is left alone (an error says so). A made
// directory is removed if it is empty; a removed one is made again, with
// its mode, unless it is there.
func UndoEntry(dirfd, tmpfd, qfd int, e Entry) error {
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
	side, serr := fileio.Lstatat(tmpfd, tmp)
	if len(e.Q) > 0 && qfd >= 0 && errors.Is(serr, unix.ENOENT) {
		if kept, err := fileio.Lstatat(qfd, string(e.Q)); err == nil && kept.Ino == e.OldIno {
			if err := fileio.RenameNoReplace(qfd, string(e.Q), tmpfd, tmp); err != nil {
				return err
			}
			side, serr = fileio.Lstatat(tmpfd, tmp)
		}
	}
	at, aerr := fileio.Lstatat(dirfd, name)
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

// undoCut undoes a journal's "cut" entry: a file still of the old size
// was not cut (a copy of its tail, if any, goes); one of the new size,
// the same inode, gets its tail back from Q once the two hash to the old
// sha256.
func undoCut(dirfd, qfd int, e Entry) error {
	f, err := fileio.OpenRegular(dirfd, string(e.Name), unix.O_RDWR|unix.O_APPEND)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := fileio.Fstat(f)
	if err != nil {
		return err
	}
	tail, terr := fileio.OpenRegular(qfd, string(e.Q), unix.O_RDONLY)
	if terr == nil {
		defer tail.Close()
	}
	switch {
	case st.Ino != e.OldIno:
	case st.Size == e.OldSize:
		if terr == nil {
			unix.Unlinkat(qfd, string(e.Q), 0)
		}
		return nil
	case st.Size == e.NewSize && terr == nil:
		h := sha256.New()
		_, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size))
		if err == nil {
			_, err = io.Copy(h, tail)
		}
		if err != nil {
			return err
		}
		if hex.EncodeToString(h.Sum(nil)) != e.OldSHA {
			break
		}
		if _, err := io.Copy(f, io.NewSectionReader(tail, 0, e.OldSize-e.NewSize)); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return unix.Unlinkat(qfd, string(e.Q), 0)
	}
	return errors.New("cut: changed since the interrupted rewind; left as it is")
}

// FileMatches checks that name in dirfd is the regular file ino, of size
// bytes whose sha256 is sum.
func FileMatches(dirfd int, name string, ino uint64, size int64, sum string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cannot be opened: %v", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := fileio.Fstat(f)
	switch {
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != ino:
		return errors.New("is not the file the journal names")
	case st.Size != size:
		return fmt.Errorf("has %d bytes, the journal says %d", st.Size, size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("has sha256 %s, the journal says %s", got, sum)
	}
	return nil
}
