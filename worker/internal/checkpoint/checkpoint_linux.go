package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Prefix starts every checkpoint's file name in the state directory.
const Prefix = "checkpoint-"

// partial starts the name a record is written under until it is whole.
const partial = "partial-checkpoint-"

// magic starts a record, followed by the sha256 of the rest.
const magic = "fsmcp-checkpoint 1 "

// Entry types.
const (
	File = 'f'
	Dir  = 'd'
)

// Entry is one recorded name.
type Entry struct {
	// Path is the real root-relative path ("" for the root).
	Path []byte `json:"p"`
	Type byte   `json:"t"`
	Mode uint32 `json:"m"`
	Size int64  `json:"z,omitempty"`
	// SHA is a file's content sha256, hex.
	SHA string `json:"s,omitempty"`
}

// Info is what a listing shows of a checkpoint.
type Info struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	Created int64  `json:"created"`
	Files   int64  `json:"files"`
	Bytes   int64  `json:"bytes"`
	TreeSHA string `json:"tree_sha256"`
	// Seq is the quarantine's entry sequence when the checkpoint was
	// taken: entries numbered above it hold versions it may need.
	Seq uint64 `json:"seq"`
}

// Record is a whole checkpoint: its Info and its entries, sorted by path.
type Record struct {
	Info
	Entries []Entry `json:"entries"`
}

// ID is the id of a checkpoint taken at created (Unix nanoseconds): ids
// sort oldest first.
func ID(created int64) string { return fmt.Sprintf("%016x", created) }

// ValidID reports whether id could name a checkpoint (and so a file in
// the state directory): 16 lower-case hex digits.
func ValidID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Sort orders the entries by path bytes.
func (r *Record) Sort() {
	slices.SortFunc(r.Entries, func(a, b Entry) int { return bytes.Compare(a.Path, b.Path) })
}

// Write stores r in the directory dirfd, durably: written under a partial
// name, fsynced, renamed, and the directory fsynced.
func Write(dirfd int, r *Record) error {
	info, err := json.Marshal(&r.Info)
	if err != nil {
		return err
	}
	entries, err := json.Marshal(r.Entries)
	if err != nil {
		return err
	}
	body := append(append(info, '\n'), entries...)
	sum := sha256.Sum256(body)
	b := append([]byte(magic+hex.EncodeToString(sum[:])+"\n"), body...)
	tmp := partial + r.ID
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, Prefix+r.ID)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return unix.Fsync(dirfd)
}

// Read reads the whole record id from dirfd and verifies it.
func Read(dirfd int, id string) (*Record, error) {
	if !ValidID(id) {
		return nil, os.ErrNotExist
	}
	fd, err := unix.Openat(dirfd, Prefix+id, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, os.ErrNotExist
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), id)
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	head, body, ok := bytes.Cut(b, []byte{'\n'})
	want, found := strings.CutPrefix(string(head), magic)
	sum := sha256.Sum256(body)
	if !ok || !found || want != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("checkpoint %s: the record does not verify", id)
	}
	info, entries, _ := bytes.Cut(body, []byte{'\n'})
	r := &Record{}
	if err := json.Unmarshal(info, &r.Info); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	if err := json.Unmarshal(entries, &r.Entries); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	if r.ID != id {
		return nil, fmt.Errorf("checkpoint %s: the record names %q", id, r.ID)
	}
	return r, nil
}

// ReadInfo reads only the Info of record id, unverified: for a listing.
func ReadInfo(dirfd int, id string) (*Info, error) {
	fd, err := unix.Openat(dirfd, Prefix+id, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), id)
	defer f.Close()
	br := bufio.NewReader(f)
	if _, err := br.ReadString('\n'); err != nil {
		return nil, err
	}
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	info := &Info{}
	if err := json.Unmarshal(line, info); err != nil || info.ID != id {
		return nil, fmt.Errorf("checkpoint %s: the record does not read", id)
	}
	return info, nil
}

// Remove deletes record id from dirfd.
func Remove(dirfd int, id string) error {
	err := unix.Unlinkat(dirfd, Prefix+id, 0)
	if err == nil {
		unix.Fsync(dirfd)
	}
	return err
}

// List reads the Info of every record in dirfd, oldest first; partial
// records (a crash while writing one) are removed, unreadable ones
// skipped.
func List(dirfd int) ([]*Info, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), "state")
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var out []*Info
	for _, n := range names {
		if strings.HasPrefix(n, partial) {
			unix.Unlinkat(dirfd, n, 0)
			continue
		}
		id, ok := strings.CutPrefix(n, Prefix)
		if !ok || !ValidID(id) {
			continue
		}
		if info, err := ReadInfo(dirfd, id); err == nil {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b *Info) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Lookup indexes the entries by path.
func (r *Record) Lookup() map[string]*Entry {
	m := make(map[string]*Entry, len(r.Entries))
	for i := range r.Entries {
		m[string(r.Entries[i].Path)] = &r.Entries[i]
	}
	return m
}
