package treewalk

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/dirent"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/rglog"
	"golang.org/x/sys/unix"
)

// direntBuffer is the walk's getdents buffer.
const direntBuffer = 32 << 10

// Dirs learns the directories of a tree from the names rg reports and
// reads each of them: it notes each directory above a name and, while rg
// runs, reads it for its entries other than regular files, the ones rg
// does not name (a symlink to a directory is in neither rg's log nor its
// parent's link count); finish then walks the directories found there that
// rg named nothing in.
type Dirs struct {
	base       int // the target's descriptor
	maxDepth   int
	tempPrefix string
	// known holds the directories (below the target) above a name rg
	// reported; last is the one above the name before.
	known map[string]bool
	last  []byte
	fresh []string
	queue chan string
	// reads holds what was read of the target ("") and of each known
	// directory; written by the goroutine that drains queue until done
	// is closed.
	reads map[string]dirRead
	done  chan struct{}
}

// dirRead is what reading one directory found.
type dirRead struct {
	// ents are its entries other than regular files and temp files.
	ents []dirName
	// whole: it was read to its end.
	whole bool
	// gone: it is no longer there, or no longer a directory.
	gone bool
}

func New(ctx context.Context, base, maxDepth int, tempPrefix string) *Dirs {
	d := &Dirs{base: base, maxDepth: maxDepth, tempPrefix: tempPrefix, known: map[string]bool{}, queue: make(chan string, 1024),
		reads: map[string]dirRead{}, done: make(chan struct{})}
	d.queue <- ""
	go func() {
		defer close(d.done)
		// The queue names parents before their children, mostly in
		// runs below one directory: each is opened in its parent, held
		// open (O_PATH) while the run lasts.
		w := &walk{ctx: ctx, tempPrefix: d.tempPrefix, buf: make([]byte, direntBuffer)}
		parents := &dirStack{base: base}
		defer parents.close()
		for p := range d.queue {
			d.reads[p] = readKnown(w, parents, p)
		}
	}()
	return d
}

// readKnown reads the directory p, below the target.
func readKnown(w *walk, parents *dirStack, p string) dirRead {
	var fd int
	var err error
	if p == "" {
		fd, err = openBelow(parents.base, "")
	} else if fd, err = parents.open(parentOf(p)); err == nil {
		fd, err = unix.Openat(fd, p[strings.LastIndexByte(p, '/')+1:], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return dirRead{gone: true}
	case err != nil:
		return dirRead{}
	}
	defer unix.Close(fd)
	ents, whole, _ := w.read(fd)
	return dirRead{ents: ents, whole: whole}
}

// Above notes the directories above rel, a path below the target rg
// reported. Only one goroutine calls it at a time.
func (d *Dirs) Above(rel []byte) {
	i := bytes.LastIndexByte(rel, '/')
	if i < 0 {
		return
	}
	dir := rel[:i]
	if bytes.Equal(dir, d.last) {
		return
	}
	d.last = append(d.last[:0], dir...)
	n := len(d.fresh)
	for len(dir) > 0 && !d.known[string(dir)] {
		p := string(dir)
		d.known[p] = true
		d.fresh = append(d.fresh, p)
		i := bytes.LastIndexByte(dir, '/')
		if i < 0 {
			break
		}
		dir = dir[:i]
	}
	// Parents first.
	for i := len(d.fresh) - 1; i >= n; i-- {
		d.queue <- d.fresh[i]
	}
	d.fresh = d.fresh[:n]
}

// Stop ends the reads, for a tree that ends in an error.
func (d *Dirs) Stop() {
	close(d.queue)
	<-d.done
}

// Finish ends the reads, once rg has ended, and gives add the directories,
// symlinks, fifos, sockets and devices of the tree that rg did not skip
// (log): those read beside rg, and those of the directories found there
// that rg named nothing in, each walked whole. Each is named below prefix,
// the target's path; a directory at max_depth has more when more names it
// (it holds a file rg listed one level deeper) or when it holds anything
// rg did not skip. Finish returns how many entries it gave and how many
// directories could not be read whole. add must copy what it keeps.
func (d *Dirs) Finish(ctx context.Context, log *rglog.Log, prefix string, more map[string]bool, add func(*fsmcpv1.TreeEntry)) (listed, unreadable int64, err error) {
	d.Stop()
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	w := &walk{ctx: ctx, log: log, maxDepth: d.maxDepth, tempPrefix: d.tempPrefix, buf: make([]byte, direntBuffer)}
	index := make(map[string]int, len(d.known))
	for p := range d.known {
		if !d.reads[p].gone {
			index[p] = len(w.held)
			w.held = append(w.held, entry{path: p, typ: fsmcpv1.FileType_FILE_TYPE_DIRECTORY, limit: depthOf(p) == d.maxDepth})
		}
	}
	for p, r := range d.reads {
		if r.gone {
			continue
		}
		self, ok := index[p]
		if !ok {
			self = -1
		}
		if err := d.place(w, p, self, r); err != nil {
			return 0, 0, err
		}
	}
	out := &fsmcpv1.TreeEntry{}
	for i := range w.held {
		e := &w.held[i]
		if log.SkippedOrUnder(e.path) {
			continue
		}
		if e.unreadable {
			unreadable++
		}
		out.Path, out.Type, out.More = []byte(join(prefix, e.path)), e.typ, false
		if e.limit {
			out.More = more[e.path] || slices.ContainsFunc(e.children, func(c string) bool { return !log.SkippedOrUnder(c) })
		}
		listed++
		add(out)
	}
	return listed, unreadable, nil
}

// place holds what was read of the directory p (below the target; held
// at self, or -1 for the target): its entries other than regular files,
// or at max_depth its children; each subdirectory rg named nothing in,
// and no rule skipped, is walked whole.
func (d *Dirs) place(w *walk, p string, self int, r dirRead) error {
	if !r.whole && self >= 0 {
		w.held[self].unreadable = true
	}
	if self >= 0 && w.held[self].limit {
		for _, e := range r.ents {
			w.held[self].children = append(w.held[self].children, join(p, e.name))
		}
		return nil
	}
	fd := -1
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	depth := depthOf(p) + 1
	for _, e := range r.ents {
		c := join(p, e.name)
		if e.typ != unix.DT_DIR {
			w.held = append(w.held, entry{path: c, typ: dirent.FileType(e.typ)})
			continue
		}
		if _, ok := d.reads[c]; ok {
			continue
		}
		if fd < 0 {
			var err error
			if fd, err = openBelow(d.base, p); err != nil {
				if self >= 0 {
					w.held[self].unreadable = true
				}
				return nil
			}
		}
		if err := w.enter(fd, e.name, c, depth); err != nil {
			return err
		}
	}
	return nil
}

// openBelow opens the directory p below the directory base for reading,
// one component at a time, never following a symlink.
func openBelow(base int, p string) (int, error) {
	if p == "" {
		return unix.Openat(base, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	fd := base
	for {
		c, rest, more := strings.Cut(p, "/")
		flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if !more {
			flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
		}
		next, err := unix.Openat(fd, c, flags, 0)
		if fd != base {
			unix.Close(fd)
		}
		if err != nil || !more {
			return next, err
		}
		fd, p = next, rest
	}
}

// parentOf is the directory of p below the target ("" for the target).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// depthOf is the depth of p below the target: 0 for the target, 1 for
// its entries.
func depthOf(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// walk walks directories through descriptors, holding what rg does
// not list: each directory, symlink, fifo, socket and device.
type walk struct {
	ctx        context.Context
	tempPrefix string
	log        *rglog.Log
	maxDepth   int
	buf        []byte
	held       []entry
}

// entry is a directory, symlink, fifo, socket or device of the tree:
// listed if no rule skipped it.
type entry struct {
	path string
	typ  fsmcpv1.FileType
	// limit: a directory at max_depth, whose children (below the target)
	// other than regular files are in children.
	limit    bool
	children []string
	// unreadable: a directory that could not be opened or read whole.
	unreadable bool
}

// dirName is a name read from a directory and its type (DT_*).
type dirName struct {
	name string
	typ  byte
}

// read reads the directory fd to its end and returns its names other than
// regular files and temp files, and whether the whole of it was read.
func (w *walk) read(fd int) ([]dirName, bool, error) {
	var out []dirName
	err := dirent.Read(w.ctx, fd, w.buf, func(name []byte, typ byte) error {
		if typ == unix.DT_REG || bytes.HasPrefix(name, []byte(w.tempPrefix)) {
			return nil
		}
		if typ == unix.DT_UNKNOWN {
			st, err := fileio.Lstatat(fd, string(name))
			if err != nil {
				return nil // gone since
			}
			if typ = dirent.Dtype(st.Mode); typ == unix.DT_REG {
				return nil
			}
		}
		out = append(out, dirName{name: string(name), typ: typ})
		return nil
	})
	switch {
	case err == nil:
		return out, true, nil
	case w.ctx.Err() != nil:
		return nil, false, w.ctx.Err()
	}
	// A directory that could not be read to its end.
	return out, false, nil
}

// dir walks the directory fd, whose path below the target is rel, at
// depth (its entries' depth); self is its index in held, or -1 for the
// target.
func (w *walk) dir(fd int, rel string, depth, self int) error {
	ents, whole, err := w.read(fd)
	if err != nil {
		return err
	}
	if !whole && self >= 0 {
		w.held[self].unreadable = true
	}
	for _, e := range ents {
		p := join(rel, e.name)
		if e.typ != unix.DT_DIR {
			w.held = append(w.held, entry{path: p, typ: dirent.FileType(e.typ)})
			continue
		}
		if err := w.enter(fd, e.name, p, depth); err != nil {
			return err
		}
	}
	return nil
}

// enter holds the directory name in the directory fd, at p and depth, and
// walks it, unless rg skipped it.
func (w *walk) enter(fd int, name, p string, depth int) error {
	if w.log.SkippedOrUnder(p) {
		return nil
	}
	w.held = append(w.held, entry{path: p, typ: fsmcpv1.FileType_FILE_TYPE_DIRECTORY, limit: depth == w.maxDepth})
	self := len(w.held) - 1
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		w.held = w.held[:self] // gone, or no longer a directory
		return nil
	case err != nil:
		w.held[self].unreadable = true
		return nil
	}
	defer unix.Close(sub)
	if depth < w.maxDepth {
		return w.dir(sub, p, depth+1, self)
	}
	return w.limit(sub, p, self)
}

// limit notes the names in the directory fd at max_depth (at p, held at
// self) that are not regular files: rg reports those it lists itself.
func (w *walk) limit(fd int, p string, self int) error {
	ents, _, err := w.read(fd)
	if err != nil {
		return err
	}
	h := &w.held[self]
	for _, e := range ents {
		h.children = append(h.children, join(p, e.name))
	}
	return nil
}

// Sizes fills in the size of each file of a page (whose paths are below
// prefix, the path of the directory base), lstat'ed through
// descriptors (each directory opened relative to its parent, O_PATH and
// O_NOFOLLOW), and drops those no longer regular files. It returns the
// page and how many it dropped. The page is sorted, so each half shares
// its directories; the halves are stat'ed side by side.
func Sizes(base int, prefix string, entries []*fsmcpv1.TreeEntry) ([]*fsmcpv1.TreeEntry, int64) {
	skip := len(prefix)
	if skip > 0 {
		skip++
	}
	half := len(entries) / 2
	if half < sizeSplit {
		half = len(entries)
	}
	var wg sync.WaitGroup
	if half < len(entries) {
		wg.Go(func() { sizeRun(base, skip, entries[half:]) })
	}
	sizeRun(base, skip, entries[:half])
	wg.Wait()
	out := entries[:0]
	for _, e := range entries {
		if e.Type != fsmcpv1.FileType_FILE_TYPE_UNSPECIFIED {
			out = append(out, e)
		}
	}
	return out, int64(len(entries) - len(out))
}

// sizeSplit is the fewest entries a page has for its halves to be stat'ed
// side by side.
const sizeSplit = 64

// sizeRun sizes the files of entries, whose paths are below the target
// after skip bytes, and marks those gone or replaced with no type.
func sizeRun(base, skip int, entries []*fsmcpv1.TreeEntry) {
	d := &dirStack{base: base}
	defer d.close()
	for _, e := range entries {
		if e.Type != fsmcpv1.FileType_FILE_TYPE_FILE {
			continue
		}
		rel := string(e.Path[skip:])
		dir, name := "", rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			dir, name = rel[:i], rel[i+1:]
		}
		fd, err := d.open(dir)
		if err != nil {
			e.Type = fsmcpv1.FileType_FILE_TYPE_UNSPECIFIED
			continue
		}
		st, err := fileio.Lstatat(fd, name)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			e.Type = fsmcpv1.FileType_FILE_TYPE_UNSPECIFIED // gone since, or replaced
			continue
		}
		e.Size = st.Size
	}
}

// dirStack keeps open, O_PATH, the directories from the target down to
// the one last asked for, so that a sorted page opens each directory once.
type dirStack struct {
	base  int
	paths []string
	fds   []int
}

// open returns a descriptor of dir (below the target; "" is the target).
func (d *dirStack) open(dir string) (int, error) {
	for len(d.paths) > 0 {
		top := d.paths[len(d.paths)-1]
		if dir == top || strings.HasPrefix(dir, top+"/") {
			break
		}
		unix.Close(d.fds[len(d.fds)-1])
		d.paths, d.fds = d.paths[:len(d.paths)-1], d.fds[:len(d.fds)-1]
	}
	fd, at := d.base, ""
	if len(d.paths) > 0 {
		fd, at = d.fds[len(d.fds)-1], d.paths[len(d.paths)-1]
	}
	rest := strings.TrimPrefix(dir[len(at):], "/")
	for rest != "" {
		c, tail, _ := strings.Cut(rest, "/")
		sub, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		at = join(at, c)
		d.paths, d.fds = append(d.paths, at), append(d.fds, sub)
		fd, rest = sub, tail
	}
	return fd, nil
}

func (d *dirStack) close() {
	for _, fd := range d.fds {
		unix.Close(fd)
	}
}

// join joins a directory below the target ("" for the target) and a name.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
