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
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// Tree lists a subtree as fs_glob would see it, directories included.
//
// rg decides what is listed, so that ignore files, hidden names and
// exclusions mean exactly what they mean to fs_glob: one rg --files run,
// with fs_glob's options, names the regular files, and its --debug log
// names every entry its walk skipped by a rule ("ignoring ./x: Ignore(…)").
// rg lists no directories, so while rg runs the worker walks the same
// subtree itself, through descriptors (each directory opened relative to
// its parent with O_NOFOLLOW, never following a symlink), to the same
// depth, and notes every directory, symlink, fifo, socket and device it
// meets. Once both are done, it lists the files rg listed, and each noted
// entry that no rule skipped, itself or through a directory above it.
// That is how empty directories (and directories whose files are all
// ignored) appear. The walk does not enter a directory rg has already
// reported skipped, and abandons one as soon as rg does; so that it cannot
// run far into an ignored tree before rg's verdict arrives, it never gets
// more than treeSlack regular files ahead of the names rg has reported,
// and it enters hidden directories last. It takes each directory's names
// in byte order, which is nearly the page's order, and lstats the regular
// files it passes, for their size, from the cursor on until what it has
// passed would fill the page half again: those are the files that can
// make the page. What it missed of the final page is stat'ed once the page
// is known. The log names
// a path lossily when it is not UTF-8 (rg prints it through Rust's lossy
// conversion), so such a name is matched against the log by its lossy
// form too: two names that differ only in invalid bytes share a fate.
//
// It does not list what lies beneath a symlinked directory. rg runs one
// level deeper than the listing, so that a directory at max_depth says
// "more" exactly when a call on it would list something.

const (
	// maxTreeDepth bounds max_depth.
	maxTreeDepth = 16
	// treeAllowance estimates the JSON an entry costs beyond its path.
	treeAllowance = 64
	// treeSlack is how many regular files the walk may see beyond the
	// names rg has reported before it waits for rg.
	treeSlack = 2048
	// treeSeenBatch is how many files rg lists between two reports of
	// them to the walk's pacing: far fewer than treeSlack.
	treeSeenBatch = 64
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
	log := newTreeLog()
	t.debug = log.line
	args := append(commonArgs(req.GetHidden(), req.GetNoIgnore()), "--files", "--null", "--debug",
		// One level deeper than listed: what rg finds there tells
		// whether a directory at the limit has more to show.
		fmt.Sprintf("--max-depth=%d", depth+1))
	opts := excludeArgs(args, req.GetExcludes())
	args = t.pathArgs(slices.Clip(opts))

	page := newKeyedPage(req.GetAfter(), req.GetHasAfter(), pageBudget(req.GetMaxBytes()),
		func(e *fsmcpv1.TreeEntry) []byte { return e.Path },
		func(e *fsmcpv1.TreeEntry) int64 { return int64(len(e.Path)) + treeAllowance },
		func(e *fsmcpv1.TreeEntry) *fsmcpv1.TreeEntry {
			return &fsmcpv1.TreeEntry{Path: bytes.Clone(e.Path), Type: e.Type, More: e.More}
		})
	// Directories at the limit holding a file rg listed one level deeper.
	more := map[string]bool{}
	var files int64
	run := s.newRG(stream.Context(), op, t, func(p *fsmcpv1.Progress) error {
		return stream.Send(&fsmcpv1.TreeResponse{Progress: p})
	})
	consume := func(r io.Reader) error {
		br := bufio.NewReaderSize(r, 64<<10)
		file := &fsmcpv1.TreeEntry{Type: fsmcpv1.FileType_FILE_TYPE_FILE}
		// unseen counts the files read but not yet told to the log.
		unseen := int64(0)
		defer func() { log.saw(unseen) }()
		for {
			name, err := br.ReadSlice(0)
			if err == io.EOF && len(name) == 0 {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read a path: %w", err)
			}
			run.files.Add(1)
			if unseen++; unseen == treeSeenBatch {
				log.saw(unseen)
				unseen = 0
			}
			rgPath := name[:len(name)-1]
			p, ok := t.display(rgPath)
			if !ok {
				continue
			}
			rel := bytes.TrimPrefix(rgPath, []byte("./"))
			if bytes.Count(rel, []byte("/")) >= depth {
				more[string(rel[:bytes.LastIndexByte(rel, '/')])] = true
				continue
			}
			files++
			file.Path = p
			page.add(file)
		}
	}

	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	w := &treeWalk{ctx: ctx, log: log, maxDepth: depth, buf: make([]byte, direntBuffer),
		prefix: t.prefix, after: req.GetAfter(), hasAfter: req.GetHasAfter(),
		sizes: map[string]int64{}, statRoom: pageBudget(req.GetMaxBytes()) * 3 / 2}
	walked := make(chan error, 1)
	go func() { walked <- w.dir(int(t.dir.Fd()), "", 1, -1) }()
	rgErr := run.run(args, consume)
	log.finish()
	if rgErr != nil {
		cancel()
	}
	walkErr := <-walked
	if rgErr != nil {
		return rgErr
	}
	if walkErr != nil {
		return fsError(op, t.prefix, walkErr)
	}
	errs, err := run.result(opts)
	if err != nil {
		return err
	}

	total := files
	entry := &fsmcpv1.TreeEntry{}
	for i := range w.held {
		e := &w.held[i]
		if log.skippedOrUnder(e.path) {
			continue
		}
		if e.unreadable {
			errs++
		}
		entry.Path, entry.Type, entry.More = []byte(joinRel(t.prefix, e.path)), e.typ, false
		if e.limit {
			entry.More = more[e.path] || slices.ContainsFunc(e.children, func(c string) bool { return !log.skippedOrUnder(c) })
		}
		total++
		page.add(entry)
	}
	entries, truncated := page.result()
	entries, gone := sizeFiles(t, entries, w.sizes)
	return stream.Send(&fsmcpv1.TreeResponse{Entries: entries, More: truncated, Done: true, Total: total - gone, Errors: errs})
}

// excludeArgs adds the client's exclusions, each as a negated glob. They
// come before pathArgs adds fsmcp's own exclusions: in rg the last
// matching glob wins, so none of them can re-include a temp file.
func excludeArgs(args, excludes []string) []string {
	for _, g := range excludes {
		args = append(args, "--glob=!"+g)
	}
	return args
}

// treeLog is what the walk learns from rg while rg runs: from its --debug
// lines, the paths its walk skipped by a rule, as rg printed them (lossily,
// if not UTF-8) without "./"; and how many names rg has reported so far
// (files listed and entries skipped), which paces the walk.
type treeLog struct {
	mu      sync.Mutex
	cond    sync.Cond
	skipped map[string]bool
	pending []byte
	seen    int64
	done    bool
}

func newTreeLog() *treeLog {
	l := &treeLog{skipped: map[string]bool{}}
	l.cond.L = &l.mu
	return l
}

// saw counts n more files rg listed.
func (l *treeLog) saw(n int64) {
	l.mu.Lock()
	l.seen += n
	l.mu.Unlock()
	l.cond.Broadcast()
}

// finish records that rg has ended: the walk no longer waits.
func (l *treeLog) finish() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
	l.cond.Broadcast()
}

// pace waits, while rg runs, until rg has reported at least
// walked - treeSlack names.
func (l *treeLog) pace(walked int64) {
	l.mu.Lock()
	for !l.done && walked > l.seen+treeSlack {
		l.cond.Wait()
	}
	l.mu.Unlock()
}

// skippedOrUnder reports whether rg skipped p (a path below the target)
// or a directory above it.
func (l *treeLog) skippedOrUnder(p string) bool {
	lp := lossy(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range len(lp) {
		if lp[i] == '/' && l.skipped[lp[:i]] {
			return true
		}
	}
	return l.skipped[lp]
}

func (l *treeLog) line(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending != nil {
		// A name with a newline: the record continues.
		b = append(append(l.pending, '\n'), b...)
		l.pending = nil
	}
	const mark = "ignoring ./"
	i := bytes.Index(b, []byte(mark))
	if i < 0 {
		return
	}
	rest := b[i+len(mark):]
	if j := bytes.Index(rest, []byte(": Ignore(")); j >= 0 {
		l.skipped[string(rest[:j])] = true
		l.seen++
		l.cond.Broadcast()
		return
	}
	if bytes.Contains(rest, []byte(": failed to pass subject filter")) {
		return // not a rule: a symlink or special file, which the walk lists
	}
	if len(b) < maxPathBytes {
		l.pending = bytes.Clone(b)
	}
}

// debugSplitter passes rg's stderr on, line by line: debug lines to debug,
// the rest to rest.
type debugSplitter struct {
	debug func([]byte)
	rest  io.Writer
	buf   []byte
}

func (d *debugSplitter) Write(p []byte) (int, error) {
	d.buf = append(d.buf, p...)
	for {
		i := bytes.IndexByte(d.buf, '\n')
		if i < 0 {
			break
		}
		line := d.buf[:i]
		if bytes.HasPrefix(line, []byte("DEBUG|")) || !bytes.HasPrefix(line, []byte("rg: ")) && d.inRecord(line) {
			d.debug(line)
		} else {
			d.rest.Write(d.buf[:i+1])
		}
		d.buf = d.buf[i+1:]
	}
	if len(d.buf) > maxPathBytes*2 {
		d.rest.Write(d.buf)
		d.buf = d.buf[:0]
	}
	return len(p), nil
}

// inRecord: a line that does not start a message of its own continues a
// debug record whose path held a newline. rg's own messages start with
// "rg: " or a path followed by ": "; a continuation is told apart by the
// rule text that ends it.
func (d *debugSplitter) inRecord(line []byte) bool {
	return bytes.Contains(line, []byte(": Ignore(IgnoreMatch(")) || bytes.Contains(line, []byte(": failed to pass subject filter"))
}

// treeWalk walks the subtree through descriptors, noting what rg does not
// list.
type treeWalk struct {
	ctx      context.Context
	log      *treeLog
	maxDepth int
	buf      []byte
	// regular counts the regular files seen, to pace the walk.
	regular int64
	held    []heldEntry
	// sizes are the sizes of the regular files the walk stat'ed, by
	// path below the target: those after the cursor (after, in the
	// page's terms: with prefix) while statRoom, the page's budget and a
	// half, was not used up by the entries passed after it.
	sizes    map[string]int64
	statRoom int64
	prefix   string
	after    []byte
	hasAfter bool
	key      []byte
}

// pass charges the entry name in the directory at rel (below the target)
// to statRoom if it comes after the cursor, and reports whether it did.
func (w *treeWalk) pass(rel, name string) bool {
	if w.statRoom <= 0 {
		return false
	}
	k := w.key[:0]
	if w.prefix != "" {
		k = append(append(k, w.prefix...), '/')
	}
	if rel != "" {
		k = append(append(k, rel...), '/')
	}
	k = append(k, name...)
	w.key = k
	if w.hasAfter && bytes.Compare(k, w.after) <= 0 {
		return false
	}
	w.statRoom -= int64(len(k)) + treeAllowance
	return true
}

// sizeFile records the size of the regular file name in the directory fd
// (at rel) if it can make the page.
func (w *treeWalk) sizeFile(fd int, rel, name string) {
	if !w.pass(rel, name) {
		return
	}
	st, err := fstatat(fd, name)
	if err == nil && fileType(st.Mode) == fsmcpv1.FileType_FILE_TYPE_FILE {
		w.sizes[joinRel(rel, name)] = st.Size
	}
}

// heldEntry is a directory, symlink, fifo, socket or device the walk met:
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

// read reads the directory fd (at rel below the target) to its end and
// returns its names other than temp files, and whether the whole of it was
// read. It stops early, returning what it has, once rg has skipped rel or
// a directory above it.
func (w *treeWalk) read(fd int, rel string) ([]dirent, bool, error) {
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
			if string(name) == "." || string(name) == ".." || bytes.HasPrefix(name, []byte(tempPrefix)) {
				continue
			}
			if typ == unix.DT_UNKNOWN {
				st, err := fstatat(fd, string(name))
				if err != nil {
					continue // gone since
				}
				typ = dtype(st.Mode)
			}
			if typ == unix.DT_REG {
				w.regular++
				if w.statRoom <= 0 {
					// Past what the page can hold: counted, to pace
					// the walk, and not kept.
					continue
				}
			}
			out = append(out, dirent{name: string(name), typ: typ})
		}
		w.log.pace(w.regular)
		if w.log.skippedOrUnder(rel) {
			return out, true, nil
		}
	}
}

// dir walks the directory fd, whose path below the target is rel, at
// depth (its entries' depth); self is its index in held, or -1 for the
// target.
func (w *treeWalk) dir(fd int, rel string, depth, self int) error {
	ents, whole, err := w.read(fd, rel)
	if err != nil {
		return err
	}
	if !whole && self >= 0 {
		w.held[self].unreadable = true
	}
	// By name, hidden names last: rg has reported a hidden directory
	// skipped by then, when it does, and the walk need not enter it.
	slices.SortFunc(ents, func(a, b dirent) int {
		if c := boolInt(strings.HasPrefix(a.name, ".")) - boolInt(strings.HasPrefix(b.name, ".")); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, e := range ents {
		if e.typ == unix.DT_REG {
			w.sizeFile(fd, rel, e.name)
			continue
		}
		w.pass(rel, e.name)
		p := joinRel(rel, e.name)
		if e.typ != unix.DT_DIR {
			w.held = append(w.held, heldEntry{path: p, typ: direntType(e.typ)})
			continue
		}
		if w.log.skippedOrUnder(p) {
			continue
		}
		w.held = append(w.held, heldEntry{path: p, typ: fsmcpv1.FileType_FILE_TYPE_DIRECTORY, limit: depth == w.maxDepth})
		sub, err := unix.Openat(fd, e.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			w.held = w.held[:len(w.held)-1] // gone, or no longer a directory
			continue
		case err != nil:
			w.held[len(w.held)-1].unreadable = true
			continue
		}
		if self := len(w.held) - 1; depth < w.maxDepth {
			err = w.dir(sub, p, depth+1, self)
		} else {
			err = w.limit(sub, p, self)
		}
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// limit notes the names in the directory fd at max_depth (at p, held at
// self) that are not regular files: rg reports those it lists itself.
func (w *treeWalk) limit(fd int, p string, self int) error {
	ents, _, err := w.read(fd, p)
	if err != nil {
		return err
	}
	h := &w.held[self]
	for _, e := range ents {
		if e.typ == unix.DT_REG {
			continue
		}
		h.children = append(h.children, joinRel(p, e.name))
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dtype is the directory entry type of a stat mode.
func dtype(mode uint32) byte {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFIFO:
		return unix.DT_FIFO
	case unix.S_IFSOCK:
		return unix.DT_SOCK
	case unix.S_IFCHR:
		return unix.DT_CHR
	case unix.S_IFBLK:
		return unix.DT_BLK
	}
	return unix.DT_UNKNOWN
}

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

// sizeFiles fills in the size of each file of a page, from sizes (by path
// below the target) or else lstat'ed through descriptors (each directory
// opened relative to its parent, O_PATH and O_NOFOLLOW), and drops those no
// longer regular files. It returns the page and how many it dropped.
func sizeFiles(t *searchTarget, entries []*fsmcpv1.TreeEntry, sizes map[string]int64) ([]*fsmcpv1.TreeEntry, int64) {
	d := &dirStack{base: int(t.dir.Fd())}
	defer d.close()
	skip := len(t.prefix)
	if skip > 0 {
		skip++
	}
	out := entries[:0]
	for _, e := range entries {
		if e.Type != fsmcpv1.FileType_FILE_TYPE_FILE {
			out = append(out, e)
			continue
		}
		rel := string(e.Path[skip:])
		if n, ok := sizes[rel]; ok {
			e.Size = n
			out = append(out, e)
			continue
		}
		dir, name := "", rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			dir, name = rel[:i], rel[i+1:]
		}
		fd, err := d.open(dir)
		if err != nil {
			continue
		}
		st, err := fstatat(fd, name)
		if err != nil || fileType(st.Mode) != fsmcpv1.FileType_FILE_TYPE_FILE {
			continue // gone since, or replaced
		}
		e.Size = st.Size
		out = append(out, e)
	}
	return out, int64(len(entries) - len(out))
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

// lossy is p as rg prints a path that is not UTF-8: each invalid byte
// replaced by U+FFFD.
func lossy(p string) string {
	if utf8.ValidString(p) {
		return p
	}
	var b strings.Builder
	for _, r := range p {
		b.WriteRune(r)
	}
	return b.String()
}
