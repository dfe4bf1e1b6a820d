package quarantine

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Names in the state directory.
const (
	IndexName = "quarantine-index"
	KeyName   = "quarantine-key"
	indexTmp  = "partial-quarantine-index"
)

// Record ops.
const (
	OpAdd  = "add"
	OpDel  = "del"
	OpUsed = "used"
)

// Part is one name of an entry (see the worker's qPart).
type Part struct {
	Name      string `json:"q,omitempty"`
	Kind      uint8  `json:"k"`
	Path      []byte `json:"p"`
	ParentDev uint64 `json:"pd"`
	ParentIno uint64 `json:"pi"`
	Base      []byte `json:"b"`
	NowDev    uint64 `json:"nd,omitempty"`
	NowIno    uint64 `json:"ni,omitempty"`
	NowSize   int64  `json:"ns,omitempty"`
	NowSec    int64  `json:"nts,omitempty"`
	NowNsec   int64  `json:"ntn,omitempty"`
	NowSHA    string `json:"nsha,omitempty"`
	KeptSHA   string `json:"ksha,omitempty"`
	Gone      bool   `json:"g,omitempty"`
	// OldSize is the size an append's undo cuts the file back to.
	OldSize int64 `json:"os,omitempty"`
}

// Record is one line of the index.
type Record struct {
	Op    string `json:"op"`
	ID    uint64 `json:"id"`
	Bytes int64  `json:"bytes,omitempty"`
	Parts []Part `json:"parts,omitempty"`
}

// Entry is an entry the index holds.
type Entry struct {
	ID    uint64
	Bytes int64
	Parts []Part
}

// State is what the index says after replay: the live entries in id
// order, the spent ids, and the highest id ever given.
type State struct {
	Entries []Entry
	Used    map[uint64]bool
	MaxID   uint64
}

// Key reads the token key from dirfd, creating it (32 random bytes,
// 0600) on first use.
func Key(dirfd int) ([32]byte, error) {
	var key [32]byte
	fd, err := unix.Openat(dirfd, KeyName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		if _, err := rand.Read(key[:]); err != nil {
			return key, err
		}
		tmp := KeyName + ".partial"
		wfd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return key, err
		}
		f := os.NewFile(uintptr(wfd), tmp)
		_, err = f.Write(key[:])
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err == nil {
			err = unix.Renameat2(dirfd, tmp, dirfd, KeyName, unix.RENAME_NOREPLACE)
		}
		if err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
			return key, err
		}
		return key, unix.Fsync(dirfd)
	}
	if err != nil {
		return key, err
	}
	f := os.NewFile(uintptr(fd), KeyName)
	defer f.Close()
	if _, err := io.ReadFull(f, key[:]); err != nil {
		return key, errors.New("the quarantine key is damaged")
	}
	return key, nil
}

// Load replays the index in dirfd (empty when there is none).
func Load(dirfd int) (*State, error) {
	st := &State{Used: map[uint64]bool{}}
	fd, err := unix.Openat(dirfd, IndexName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), IndexName)
	defer f.Close()
	live := map[uint64]int{}
	var all []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r Record
		if json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &r) != nil {
			break // a torn last line
		}
		st.MaxID = max(st.MaxID, r.ID)
		switch r.Op {
		case OpAdd:
			live[r.ID] = len(all)
			all = append(all, Entry{ID: r.ID, Bytes: r.Bytes, Parts: r.Parts})
		case OpDel:
			delete(live, r.ID)
		case OpUsed:
			st.Used[r.ID] = true
		}
	}
	for i, e := range all {
		if j, ok := live[e.ID]; ok && j == i {
			st.Entries = append(st.Entries, e)
		}
	}
	return st, nil
}

// Rewrite replaces the index in dirfd with st compacted, and returns the
// index opened for appending.
func Rewrite(dirfd int, st *State) (*os.File, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// The highest id is kept even when its entry is gone, so that ids
	// (and so tokens) are never given twice.
	if err := enc.Encode(Record{Op: OpDel, ID: st.MaxID}); err != nil {
		return nil, err
	}
	for id := range st.Used {
		enc.Encode(Record{Op: OpUsed, ID: id})
	}
	for _, e := range st.Entries {
		enc.Encode(Record{Op: OpAdd, ID: e.ID, Bytes: e.Bytes, Parts: e.Parts})
	}
	fd, err := unix.Openat(dirfd, indexTmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), indexTmp)
	_, err = f.Write(b.Bytes())
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err == nil {
		err = unix.Renameat(dirfd, indexTmp, dirfd, IndexName)
	}
	if err != nil {
		unix.Unlinkat(dirfd, indexTmp, 0)
		return nil, err
	}
	unix.Fsync(dirfd)
	afd, err := unix.Openat(dirfd, IndexName, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(afd), IndexName), nil
}

// Append writes r to the index f; sync makes it durable.
func Append(f *os.File, r Record, sync bool) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	if sync {
		return unix.Fdatasync(int(f.Fd()))
	}
	return nil
}
