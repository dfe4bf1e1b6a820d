package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/paging"
	"github.com/fsmcp/fsmcp/worker/internal/rgargs"
	"github.com/fsmcp/fsmcp/worker/internal/rglog"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// Tree lists a subtree as fs_glob would see it, directories included.
//
// rg decides what is listed, so that ignore files, hidden names and
// exclusions mean exactly what they mean to fs_glob: one rg --files run,
// with fs_glob's options, names the regular files, and its --debug log
// names every entry its walk skipped by a rule ("ignoring ./x: Ignore(…)").
// rg names no directory and not every symlink (one to a directory is
// passed over silently), so the walk reads the rest itself:
//
//   - every directory above a name rg reported is one rg read; while rg
//     runs, each is read as it is learned (opened in its parent with
//     O_NOFOLLOW, through descriptors) for its entries other than regular
//     files: its symlinks, fifos, sockets, devices and subdirectories;
//   - once rg has ended, a subdirectory found there that rg named nothing
//     in (an empty one, or one whose files are all ignored) and that no
//     rule skipped is walked whole the same way. That is how empty
//     directories appear.
//
// Every entry read is judged by the log: one rg skipped, or below one, is
// left out. A name in the log that is not UTF-8 arrives lossily (rg prints
// paths through Rust's lossy conversion), so rg's verdicts are matched
// against each name's lossy form: two names that differ only in invalid
// bytes share a fate.
//
// It does not list what lies beneath a symlinked directory. rg runs one
// level deeper than the listing, so that a directory at max_depth says
// "more" exactly when a call on it would list something. The page's files
// are lstat'ed for their size once the page is known.

const (
	// maxTreeDepth bounds max_depth.
	maxTreeDepth = 16
	// treeAllowance estimates the JSON an entry costs beyond its path.
	treeAllowance = 64
	// direntBuffer is the walk's getdents buffer.
	direntBuffer = 32 << 10
)

// Tree implements fsmcpv1.WorkerServiceServer.
func (s *Service) Tree(req *fsmcpv1.TreeRequest, stream grpc.ServerStreamingServer[fsmcpv1.TreeResponse]) error {
	const op = "tree"
	depth := int(req.GetMaxDepth())
	if depth < 1 || depth > maxTreeDepth {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "%s: max_depth must be between 1 and %d", op, maxTreeDepth)
	}
	for _, g := range req.GetExcludes() {
		if err := checkArg(op, "exclude", g); err != nil {
			return err
		}
	}
	t, err := s.openSearch(stream.Context(), op, req.GetPath(), accessMeta)
	if err != nil {
		return err
	}
	defer t.close()
	if t.file != nil {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY, t.prefix, "%s: not a directory", op)
	}
	log := rglog.NewLog()
	t.debug = log.Line
	opts := rgargs.Tree(req)
	args := t.pathArgs(slices.Clip(opts))

	page := paging.NewKeyed(req.GetAfter(), req.GetHasAfter(), paging.Budget(req.GetMaxBytes()),
		func(e *fsmcpv1.TreeEntry) []byte { return e.Path },
		func(e *fsmcpv1.TreeEntry) int64 { return int64(len(e.Path)) + treeAllowance },
		func(e *fsmcpv1.TreeEntry) *fsmcpv1.TreeEntry {
			return &fsmcpv1.TreeEntry{Path: bytes.Clone(e.Path), Type: e.Type, More: e.More}
		})
	// Directories at the limit holding a file rg listed one level deeper.
	more := map[string]bool{}
	var files int64
	ds := newTreeDirs(stream.Context(), int(t.dir.Fd()), depth)
	run := s.newRG(stream.Context(), op, t, func(p *fsmcpv1.Progress) error {
		return stream.Send(&fsmcpv1.TreeResponse{Progress: p})
	})
	consume := func(r io.Reader) error {
		br := bufio.NewReaderSize(r, 64<<10)
		file := &fsmcpv1.TreeEntry{Type: fsmcpv1.FileType_FILE_TYPE_FILE}
		for {
			name, err := br.ReadSlice(0)
			if err == io.EOF && len(name) == 0 {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read a path: %w", err)
			}
			run.files.Add(1)
			rgPath := name[:len(name)-1]
			rel := bytes.TrimPrefix(rgPath, []byte("./"))
			ds.above(rel)
			p, ok := t.display(rgPath)
			if !ok {
				continue
			}
			if bytes.Count(rel, []byte("/")) >= depth {
				more[string(rel[:bytes.LastIndexByte(rel, '/')])] = true
				continue
			}
			files++
			file.Path = p
			page.Add(file)
		}
	}
	rgErr := run.run(args, consume)
	if rgErr != nil {
		ds.stop()
		return rgErr
	}
	errs, err := run.result(opts)
	if err != nil {
		ds.stop()
		return err
	}
	held, err := ds.finish(stream.Context(), log)
	if err != nil {
		return fsError(op, t.prefix, err)
	}

	total := files
	entry := &fsmcpv1.TreeEntry{}
	for i := range held {
		e := &held[i]
		if log.SkippedOrUnder(e.path) {
			continue
		}
		if e.unreadable {
			errs++
		}
		entry.Path, entry.Type, entry.More = []byte(joinRel(t.prefix, e.path)), e.typ, false
		if e.limit {
			entry.More = more[e.path] || slices.ContainsFunc(e.children, func(c string) bool { return !log.SkippedOrUnder(c) })
		}
		total++
		page.Add(entry)
	}
	entries, truncated := page.Result()
	entries, gone := sizeFiles(t, entries)
	return stream.Send(&fsmcpv1.TreeResponse{Entries: entries, More: truncated, Done: true, Total: total - gone, Errors: errs})
}

// treeDirs learns the directories of a tree from the names rg reports and
// reads each of them: it notes each directory above a name and, while rg
// runs, reads it for its entries other than regular files, the ones rg
// does not name (a symlink to a directory is in neither rg's log nor its
// parent's link count); finish then walks the directories found there that
// rg named nothing in.
type treeDirs struct {
	base     int // the target's descriptor
	maxDepth int
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
	ents []dirent
	// whole: it was read to its end.
	whole bool
	// gone: it is no longer there, or no longer a directory.
	gone bool
}

func newTreeDirs(ctx context.Context, base, maxDepth int) *treeDirs {
	d := &treeDirs{base: base, maxDepth: maxDepth, known: map[string]bool{}, queue: make(chan string, 1024),
		reads: map[string]dirRead{}, done: make(chan struct{})}
	d.queue <- ""
	go func() {
		defer close(d.done)
		// The queue names parents before their children, mostly in
		// runs below one directory: each is opened in its parent, held
		// open (O_PATH) while the run lasts.
		w := &treeWalk{ctx: ctx, buf: make([]byte, direntBuffer)}
		parents := &dirStack{base: base}
		defer parents.close()
		for p := range d.queue {
			d.reads[p] = readKnown(w, parents, p)
		}
	}()
	return d
}

// readKnown reads the directory p, below the target.
func readKnown(w *treeWalk, parents *dirStack, p string) dirRead {
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

// above notes the directories above rel, a path below the target rg
// reported. Only one goroutine calls it at a time.
func (d *treeDirs) above(rel []byte) {
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

// stop ends the reads, for a tree that ends in an error.
func (d *treeDirs) stop() {
	close(d.queue)
	<-d.done
}

// finish returns the directories, symlinks, fifos, sockets and devices of
// the tree, once rg has ended: those read beside rg, and those of the
// directories found there that rg named nothing in, each walked whole.
func (d *treeDirs) finish(ctx context.Context, log *rglog.Log) ([]heldEntry, error) {
	d.stop()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &treeWalk{ctx: ctx, log: log, maxDepth: d.maxDepth, buf: make([]byte, direntBuffer)}
	index := make(map[string]int, len(d.known))
	for p := range d.known {
		if !d.reads[p].gone {
			index[p] = len(w.held)
			w.held = append(w.held, heldEntry{path: p, typ: fsmcpv1.FileType_FILE_TYPE_DIRECTORY, limit: depthOf(p) == d.maxDepth})
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
			return nil, err
		}
	}
	return w.held, nil
}

// place holds what was read of the directory p (below the target; held
// at self, or -1 for the target): its entries other than regular files,
// or at max_depth its children; each subdirectory rg named nothing in,
// and no rule skipped, is walked whole.
func (d *treeDirs) place(w *treeWalk, p string, self int, r dirRead) error {
	if !r.whole && self >= 0 {
		w.held[self].unreadable = true
	}
	if self >= 0 && w.held[self].limit {
		for _, e := range r.ents {
			w.held[self].children = append(w.held[self].children, joinRel(p, e.name))
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
		c := joinRel(p, e.name)
		if e.typ != unix.DT_DIR {
			w.held = append(w.held, heldEntry{path: c, typ: direntType(e.typ)})
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

// treeWalk walks directories through descriptors, holding what rg does
// not list: each directory, symlink, fifo, socket and device.
type treeWalk struct {
	ctx      context.Context
	log      *rglog.Log
	maxDepth int
	buf      []byte
	held     []heldEntry
}

// heldEntry is a directory, symlink, fifo, socket or device of the tree:
// listed if no rule skipped it.
type heldEntry struct {
	path string
	typ  fsmcpv1.FileType
	// limit: a directory at max_depth, whose children (below the target)
	// other than regular files are in children.
	limit    bool
	children []string
	// unreadable: a directory that could not be opened or read whole.
	unreadable bool
}

// dirent is a name read from a directory and its type (DT_*).
type dirent struct {
	name string
	typ  byte
}

// read reads the directory fd to its end and returns its names other than
// regular files and temp files, and whether the whole of it was read.
func (w *treeWalk) read(fd int) ([]dirent, bool, error) {
	var out []dirent
	for {
		if err := w.ctx.Err(); err != nil {
			return nil, false, err
		}
		n, err := unix.Getdents(fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return out, false, nil
		}
		if n <= 0 {
			return out, true, nil
		}
		for b := w.buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return out, false, nil
			}
			typ, name := b[18], b[19:reclen]
			b = b[reclen:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if typ == unix.DT_REG || string(name) == "." || string(name) == ".." || bytes.HasPrefix(name, []byte(tempPrefix)) {
				continue
			}
			if typ == unix.DT_UNKNOWN {
				st, err := fstatat(fd, string(name))
				if err != nil {
					continue // gone since
				}
				if typ = dtype(st.Mode); typ == unix.DT_REG {
					continue
				}
			}
			out = append(out, dirent{name: string(name), typ: typ})
		}
	}
}

// dir walks the directory fd, whose path below the target is rel, at
// depth (its entries' depth); self is its index in held, or -1 for the
// target.
func (w *treeWalk) dir(fd int, rel string, depth, self int) error {
	ents, whole, err := w.read(fd)
	if err != nil {
		return err
	}
	if !whole && self >= 0 {
		w.held[self].unreadable = true
	}
	for _, e := range ents {
		p := joinRel(rel, e.name)
		if e.typ != unix.DT_DIR {
			w.held = append(w.held, heldEntry{path: p, typ: direntType(e.typ)})
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
func (w *treeWalk) enter(fd int, name, p string, depth int) error {
	if w.log.SkippedOrUnder(p) {
		return nil
	}
	w.held = append(w.held, heldEntry{path: p, typ: fsmcpv1.FileType_FILE_TYPE_DIRECTORY, limit: depth == w.maxDepth})
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
func (w *treeWalk) limit(fd int, p string, self int) error {
	ents, _, err := w.read(fd)
	if err != nil {
		return err
	}
	h := &w.held[self]
	for _, e := range ents {
		h.children = append(h.children, joinRel(p, e.name))
	}
	return nil
}

// dtype is the directory entry type of a stat mode: on Linux a DT_ value
// is the mode's S_IFMT bits shifted down by 12 (glibc's IFTODT).
func dtype(mode uint32) byte { return byte(mode & unix.S_IFMT >> 12) }

// direntType is the file type of a directory entry type.
func direntType(t byte) fsmcpv1.FileType {
	switch t {
	case unix.DT_REG:
		return fsmcpv1.FileType_FILE_TYPE_FILE
	case unix.DT_DIR:
		return fsmcpv1.FileType_FILE_TYPE_DIRECTORY
	case unix.DT_LNK:
		return fsmcpv1.FileType_FILE_TYPE_SYMLINK
	case unix.DT_FIFO:
		return fsmcpv1.FileType_FILE_TYPE_FIFO
	case unix.DT_SOCK:
		return fsmcpv1.FileType_FILE_TYPE_SOCKET
	case unix.DT_CHR, unix.DT_BLK:
		return fsmcpv1.FileType_FILE_TYPE_DEVICE
	}
	return fsmcpv1.FileType_FILE_TYPE_UNSPECIFIED
}

// sizeFiles fills in the size of each file of a page, lstat'ed through
// descriptors (each directory opened relative to its parent, O_PATH and
// O_NOFOLLOW), and drops those no longer regular files. It returns the
// page and how many it dropped. The page is sorted, so each half shares
// its directories; the halves are stat'ed side by side.
func sizeFiles(t *searchTarget, entries []*fsmcpv1.TreeEntry) ([]*fsmcpv1.TreeEntry, int64) {
	skip := len(t.prefix)
	if skip > 0 {
		skip++
	}
	half := len(entries) / 2
	if half < sizeSplit {
		half = len(entries)
	}
	var wg sync.WaitGroup
	if half < len(entries) {
		wg.Go(func() { sizeRun(int(t.dir.Fd()), skip, entries[half:]) })
	}
	sizeRun(int(t.dir.Fd()), skip, entries[:half])
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
		st, err := fstatat(fd, name)
		if err != nil || fileType(st.Mode) != fsmcpv1.FileType_FILE_TYPE_FILE {
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
		at = joinRel(at, c)
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
