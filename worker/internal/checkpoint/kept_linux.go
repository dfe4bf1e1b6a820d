package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// Kept is where bytes with a checkpoint's sha256 may be kept: the name
// (a real path) beneath the directory Dir.
type Kept struct {
	Dir  int
	Name string
}

// Reserve takes n bytes from the worker's memory budget, until release.
type Reserve func(n int64) (release func(), err error)

// ReadKept reads the first of kept that holds want's content (verified
// by its sha256), and returns it with the file open for its metadata.
func ReadKept(kept []Kept, want *Entry, reserve Reserve) ([]byte, *os.File, bool) {
	for _, k := range kept {
		fd, err := OpenBeneath(k.Dir, k.Name)
		if err != nil {
			continue
		}
		f := os.NewFile(uintptr(fd), k.Name)
		st, err := fileio.Fstat(f)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != want.Size {
			f.Close()
			continue
		}
		release, err := reserve(st.Size)
		if err != nil {
			f.Close()
			continue
		}
		data, err := io.ReadAll(io.LimitReader(f, st.Size+1))
		release()
		sum := sha256.Sum256(data)
		if err != nil || hex.EncodeToString(sum[:]) != want.SHA {
			f.Close()
			continue
		}
		return data, f, true
	}
	return nil, nil, false
}

// ReadPrefix reads the first want.Size bytes of the tree's file rel
// when they hash to want's sha256.
func ReadPrefix(rootFD int, rel string, want *Entry, reserve Reserve) ([]byte, bool) {
	fd, err := OpenBeneath(rootFD, rel)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if st, err := fileio.Fstat(f); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < want.Size {
		return nil, false
	}
	release, err := reserve(want.Size)
	if err != nil {
		return nil, false
	}
	defer release()
	data := make([]byte, want.Size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, want.Size), data); err != nil {
		return nil, false
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]) == want.SHA
}

// OpenBeneath opens the file at the real relative path rel beneath dirfd
// without following a symlink on the way (the name is a real path in the
// root or the quarantine, which the agent may since have changed).
func OpenBeneath(dirfd int, rel string) (int, error) {
	comps := strings.Split(rel, "/")
	fd := dirfd
	for i, c := range comps {
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(comps)-1 {
			flags |= unix.O_DIRECTORY
		} else {
			flags |= unix.O_NONBLOCK
		}
		next, err := unix.Openat(fd, c, flags, 0)
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// IsText reports whether b looks like text: UTF-8 without NUL.
func IsText(b []byte) bool { return utf8.Valid(b) && !bytes.ContainsRune(b, 0) }

// FindBySize walks the names in dirfd (files, and the files of trees, to
// maxDepth) and gives found the sha256 (from hash) and path of each
// regular file whose size is in sizes.
func FindBySize(ctx context.Context, dirfd int, names []string, sizes map[int64]bool, maxDepth int,
	hash func(f *os.File, st *unix.Stat_t) (string, error), found func(sum, rel string)) {
	var walk func(dirfd int, name, rel string, depth int)
	walk = func(dirfd int, name, rel string, depth int) {
		st, err := fileio.Lstatat(dirfd, name)
		if err != nil || ctx.Err() != nil || depth > maxDepth {
			return
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if !sizes[st.Size] {
				return
			}
			fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				return
			}
			f := os.NewFile(uintptr(fd), name)
			defer f.Close()
			opened, err := fileio.Fstat(f)
			if err != nil {
				return
			}
			if sum, err := hash(f, opened); err == nil {
				found(sum, rel)
			}
		case unix.S_IFDIR:
			fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return
			}
			d := os.NewFile(uintptr(fd), name)
			defer d.Close()
			children, _ := d.Readdirnames(-1)
			for _, c := range children {
				walk(fd, c, rel+"/"+c, depth+1)
			}
		}
	}
	for _, n := range names {
		walk(dirfd, n, n, 0)
	}
}
