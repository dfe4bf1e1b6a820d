package checkpoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// TouchName is the touch log's name in the state directory: what fsmcp's
// own tools left at each path, so that a rewind can tell their changes
// from anyone else's.
const TouchName = "touch-log"

// Absent is the Type of a touch record that says nothing is at the path.
const Absent = '-'

// Touch is one record of the touch log: after a change by fsmcp's
// tools, at Time (Unix nanoseconds), Path held Type (File with SHA, Dir,
// or Absent). Tree marks an Absent record that covers every name beneath
// Path as well.
type Touch struct {
	Path []byte `json:"p"`
	Type byte   `json:"t"`
	SHA  string `json:"s,omitempty"`
	Tree bool   `json:"r,omitempty"`
	Time int64  `json:"n"`
}

// OpenTouch opens the touch log in dirfd for appending, creating it.
func OpenTouch(dirfd int) (*os.File, error) {
	fd, err := unix.Openat(dirfd, TouchName, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), TouchName), nil
}

// AppendTouch appends records to the log f, in one write. It does not
// fsync: a record lost to a crash turns a change of the tools into a
// conflict, never the reverse.
func AppendTouch(f *os.File, recs []Touch) error {
	var b []byte
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	_, err := f.Write(b)
	return err
}

// Touches is the touch log as read for one rewind.
type Touches struct {
	exact map[string]touchAt
	trees map[string]int
}

type touchAt struct {
	t Touch
	i int
}

// ReadTouch reads the records of the log in dirfd made at or after since.
func ReadTouch(dirfd int, since int64) (*Touches, error) {
	ts := &Touches{exact: map[string]touchAt{}, trees: map[string]int{}}
	fd, err := unix.Openat(dirfd, TouchName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return ts, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), TouchName)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		var t Touch
		if json.Unmarshal(sc.Bytes(), &t) != nil || t.Time < since {
			continue
		}
		p := string(t.Path)
		if t.Tree {
			ts.trees[p] = i
			continue
		}
		ts.exact[p] = touchAt{t, i}
	}
	return ts, sc.Err()
}

// Left reports what the tools last left at path: the record, and false
// when no record since covers it.
func (ts *Touches) Left(path string) (Touch, bool) {
	at, ok := ts.exact[path]
	if !ok {
		at.i = -1
	}
	for p := path; ; {
		if i, tok := ts.trees[p]; tok && i > at.i {
			return Touch{Path: []byte(path), Type: Absent}, true
		}
		if p == "" {
			break
		}
		if j := strings.LastIndexByte(p, '/'); j >= 0 {
			p = p[:j]
		} else {
			p = ""
		}
	}
	return at.t, ok
}

// Explains reports whether what is at path now (have, nil for nothing)
// is what fsmcp's tools last left there since the checkpoint.
func (ts *Touches) Explains(path string, have *Entry) bool {
	t, ok := ts.Left(path)
	switch {
	case !ok:
		return false
	case have == nil:
		return t.Type == Absent
	case have.Type == Dir:
		return t.Type == Dir
	}
	return t.Type == File && t.SHA == have.SHA
}
