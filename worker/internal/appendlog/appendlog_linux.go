package appendlog

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

const (
	// SlotPrefix starts the name of an append slot in the state
	// directory (append-slot-<random>).
	SlotPrefix = "append-slot-"
	// slotSize is a slot's size, allocated once: a record (two
	// names as base64 in JSON) fits, so each use is one pwrite and one
	// fdatasync with no change of size.
	slotSize = 16 << 10
	// magic starts a record, followed by the sha256 of the JSON and
	// its length.
	magic = "fsmcp-append 1 "
)

// Record is what a slot holds while an append runs.
type Record struct {
	RootDev uint64 `json:"root_dev"`
	RootIno uint64 `json:"root_ino"`
	// Dir is the real root-relative path of the file's directory, "" for
	// the root; Name its name there.
	Dir     []byte `json:"dir"`
	Name    []byte `json:"name"`
	Ino     uint64 `json:"ino"`
	OldSize int64  `json:"old_size"`
	OldSHA  string `json:"old_sha256"`
	NewSize int64  `json:"new_size"`
	NewSHA  string `json:"new_sha256"`
}

// Slots are the slots not in use (Free); more are made as concurrent
// appends need them. Made counts the slots this process holds.
type Slots struct {
	mu   sync.Mutex
	Free []*os.File
	Made int
}

// Take returns a free slot, making one in the state directory stateFD
// (zero-filled to slotSize and made durable) if none is. A new slot
// has a random name, so two servers of one root never share one.
func (a *Slots) Take(stateFD int) (*os.File, error) {
	a.mu.Lock()
	if n := len(a.Free); n > 0 {
		f := a.Free[n-1]
		a.Free = a.Free[:n-1]
		a.mu.Unlock()
		return f, nil
	}
	a.Made++
	a.mu.Unlock()
	var rnd [12]byte
	rand.Read(rnd[:])
	name := SlotPrefix + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(stateFD, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err = f.WriteAt(make([]byte, slotSize), 0); err == nil {
		if err = f.Sync(); err == nil {
			err = unix.Fsync(stateFD)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Put gives back a slot taken.
func (a *Slots) Put(f *os.File) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Free = append(a.Free, f)
}

// Write puts r in slot f and makes it durable.
func Write(f *os.File, r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	rec := fmt.Appendf(nil, "%s%s %d\n%s", magic, hex.EncodeToString(sum[:]), len(b), b)
	if len(rec) > slotSize {
		return fmt.Errorf("the append record takes %d bytes, more than a slot's %d", len(rec), slotSize)
	}
	if _, err := f.WriteAt(rec, 0); err != nil {
		return err
	}
	return unix.Fdatasync(int(f.Fd()))
}

// Read is the record in slot f; nil for a free slot.
func Read(f *os.File) (*Record, error) {
	b := make([]byte, slotSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	b = b[:n]
	if len(b) == 0 || b[0] == 0 {
		return nil, nil
	}
	head, body, ok := strings.Cut(string(b), "\n")
	fields := strings.Fields(strings.TrimPrefix(head, magic))
	if !ok || !strings.HasPrefix(head, magic) || len(fields) != 2 {
		return nil, errors.New("not an append record")
	}
	size, err := strconv.Atoi(fields[1])
	if err != nil || size < 0 || size > len(body) {
		return nil, errors.New("an append record cut short")
	}
	sum := sha256.Sum256([]byte(body[:size]))
	if hex.EncodeToString(sum[:]) != fields[0] {
		return nil, errors.New("an append record whose checksum does not match")
	}
	r := &Record{}
	if err := json.Unmarshal([]byte(body[:size]), r); err != nil {
		return nil, err
	}
	return r, nil
}

// Free marks slot f free. It is not synced: a record whose free mark
// is lost describes an append that completed, which recovery keeps.
func Free(f *os.File) {
	f.WriteAt([]byte{0}, 0)
}
