package dirwalk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// MaxDepth bounds a recursive walk: each level holds one descriptor.
const MaxDepth = 1024

// ErrTooDeep is a tree deeper than MaxDepth.
var ErrTooDeep = fmt.Errorf("the tree is deeper than %d levels", MaxDepth)

// Open opens the directory name in the directory fd for reading, never
// following a symlink.
func Open(fd int, name string) (int, error) {
	return unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
}

// gone reports an error of Open for a name that is no longer there, or no
// longer a directory.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// Read calls each with the entries of the open directory fd, batch at a
// time (all at once when batch <= 0), read through a duplicate descriptor
// so that fd stays the caller's. Entries read before an error are given to
// each first. It returns each's error, or the read's; nil at the end.
func Read(fd, batch int, each func(ents []fs.DirEntry) error) error {
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	for {
		ents, rerr := f.ReadDir(batch)
		if len(ents) > 0 {
			if err := each(ents); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(rerr, io.EOF), rerr == nil && (batch <= 0 || len(ents) == 0):
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// Names returns the names in the open directory fd (Read, whole).
func Names(fd int) ([]string, error) {
	var names []string
	err := Read(fd, 0, func(ents []fs.DirEntry) error {
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return nil
	})
	return names, err
}

// Walker walks a tree top down.
type Walker struct {
	// Batch is how many entries are read at a time; 0 reads each
	// directory whole.
	Batch int
	// Visit is called with each entry: dirfd is its directory, rel its
	// path from where the walk started. For a directory, it returns
	// whether to walk into it.
	Visit func(dirfd int, e fs.DirEntry, rel string) (bool, error)
	// Fail is given a directory (by rel) that could not be opened or
	// read whole, or ErrTooDeep: nil goes on without (the rest of) it,
	// an error ends the walk. A directory gone, or no longer one, when
	// it is opened is passed over.
	Fail func(rel string, err error) error
}

// Walk walks the open directory fd, whose path is rel.
func (w *Walker) Walk(fd int, rel string) error {
	return w.dir(fd, rel, 0)
}

func (w *Walker) dir(fd int, rel string, depth int) error {
	if depth > MaxDepth {
		return w.Fail(rel, ErrTooDeep)
	}
	// The walk's own errors (Visit's, Fail's) are marked, so that an
	// error of the read is told apart.
	err := Read(fd, w.Batch, func(ents []fs.DirEntry) error {
		for _, e := range ents {
			if err := w.entry(fd, e, join(rel, e.Name()), depth); err != nil {
				return walkError{err}
			}
		}
		return nil
	})
	var we walkError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &we):
		return we.error
	}
	return w.Fail(rel, err)
}

// entry visits e, at p in the directory fd at depth, and walks into it.
func (w *Walker) entry(fd int, e fs.DirEntry, p string, depth int) error {
	descend, err := w.Visit(fd, e, p)
	if err != nil || !descend || !e.IsDir() {
		return err
	}
	sub, err := Open(fd, e.Name())
	switch {
	case gone(err):
		return nil
	case err != nil:
		return w.Fail(p, err)
	}
	defer unix.Close(sub)
	return w.dir(sub, p, depth+1)
}

// walkError is an error of the walk itself, not of reading a directory.
type walkError struct{ error }

// join joins a path and a name.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// Remover removes directory trees: each entry is removed relative to its
// directory's descriptor, so a symlink is removed as a name, like a file,
// even one swapped in for a directory during the walk.
type Remover struct {
	Ctx context.Context
	// BeforeOpen, when set, runs before a directory is opened (tests
	// swap a symlink in there).
	BeforeOpen func(name string)
	// Removed counts the entries removed.
	Removed int64
}

// RemoveAll removes name, in the directory parentFD, and all it holds.
func (r *Remover) RemoveAll(parentFD int, name string) error {
	return r.removeAll(parentFD, name, 0)
}

func (r *Remover) removeAll(parentFD int, name string, depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	for attempt := 0; ; attempt++ {
		if err := r.Ctx.Err(); err != nil {
			return err
		}
		if r.BeforeOpen != nil {
			r.BeforeOpen(name)
		}
		fd, err := Open(parentFD, name)
		switch {
		case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			// No longer a directory (a symlink or file took its place):
			// remove the name itself.
			return r.unlink(parentFD, name, depth)
		case errors.Is(err, unix.ENOENT):
			return nil
		case err != nil:
			return err
		}
		err = r.empty(fd, depth)
		unix.Close(fd)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(parentFD, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil:
			r.Removed++
			return nil
		case errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)) && attempt < 8:
			continue // entries were added during the walk
		}
		return err
	}
}

// empty removes every entry of the open directory fd. A read that fails
// ends it quietly (the directory was removed under it): the rmdir after
// says whether anything is left.
func (r *Remover) empty(fd, depth int) error {
	var failed error
	Read(fd, 512, func(ents []fs.DirEntry) error {
		for _, e := range ents {
			if err := r.unlink(fd, e.Name(), depth+1); err != nil {
				failed = err
				return err
			}
		}
		return nil
	})
	return failed
}

// unlink removes one name of the directory fd: a non-directory at once, a
// directory through removeAll.
func (r *Remover) unlink(fd int, name string, depth int) error {
	if err := r.Ctx.Err(); err != nil {
		return err
	}
	err := unix.Unlinkat(fd, name, 0)
	switch {
	case err == nil:
		r.Removed++
		return nil
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EISDIR):
		return r.removeAll(fd, name, depth)
	}
	return err
}

// Size is the bytes of regular files under name in dirfd (itself, if
// it is one) and how many names it holds, without following symlinks.
func Size(dirfd int, name string, maxDepth int) (size, count int64, err error) {
	st, err := fileio.Lstatat(dirfd, name)
	if err != nil {
		return 0, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			size = st.Size
		}
		return size, 1, nil
	}
	var walk func(fd, depth int) error
	walk = func(fd, depth int) error {
		if depth > maxDepth {
			return fmt.Errorf("deeper than %d levels", maxDepth)
		}
		dup, err := unix.Dup(fd)
		if err != nil {
			return err
		}
		unix.CloseOnExec(dup)
		f := os.NewFile(uintptr(dup), "dir")
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, n := range names {
			st, err := fileio.Lstatat(fd, n)
			if err != nil {
				continue
			}
			count++
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				size += st.Size
			case unix.S_IFDIR:
				sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				err = walk(sub, depth+1)
				unix.Close(sub)
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	count = 1
	err = walk(fd, 0)
	return size, count, err
}
