package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
// rg lists no directories, so the worker walks the same subtree itself,
// through descriptors (each directory opened relative to its parent with
// O_NOFOLLOW, never following a symlink), to the same depth, and lists:
// a regular file when rg listed it; a directory, symlink, fifo, socket or
// device when rg's walk reached it and no rule skipped it. That is how
// empty directories (and directories whose files are all ignored) appear.
// A skipped directory is not entered. The log names a path lossily when it
// is not UTF-8 (rg prints it through Rust's lossy conversion), so such a
// name is matched against the log by its lossy form too: two names that
// differ only in invalid bytes share a fate.
//
// It does not list what lies beneath a symlinked directory. rg runs one
// level deeper than the listing, so that a directory at max_depth says
// "more" exactly when a call on it would list something.

const (
	// maxTreeDepth bounds max_depth.
	maxTreeDepth = 16
	// treeAllowance estimates the JSON an entry costs beyond its path.
	treeAllowance = 64
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
	t, err := s.openSearch(op, req.GetPath(), accessMeta)
	if err != nil {
		return err
	}
	defer t.close()
	if t.file != nil {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY, t.prefix, "%s: not a directory", op)
	}
	skipped := &skipLog{names: map[string]bool{}}
	t.debug = skipped.line
	args := append(commonArgs(req.GetHidden(), req.GetNoIgnore()), "--files", "--null", "--debug",
		// One level deeper than listed: what rg finds there tells
		// whether a directory at the limit has more to show.
		fmt.Sprintf("--max-depth=%d", depth+1))
	opts := excludeArgs(args, req.GetExcludes())
	args = t.pathArgs(slices.Clip(opts))

	files := map[string]bool{}
	run := s.newRG(stream.Context(), op, t, func(p *fsmcpv1.Progress) error {
		return stream.Send(&fsmcpv1.TreeResponse{Progress: p})
	})
	consume := func(r io.Reader) error {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			name, err := br.ReadSlice(0)
			if err == io.EOF && len(name) == 0 {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read a path: %w", err)
			}
			files[string(bytes.TrimPrefix(name[:len(name)-1], []byte("./")))] = true
			run.files.Add(1)
		}
	}
	if err := run.run(args, consume); err != nil {
		return err
	}
	errs, err := run.result(opts)
	if err != nil {
		return err
	}

	w := &treeWalk{ctx: stream.Context(), t: t, files: files, skipped: skipped.names, maxDepth: depth,
		page: newKeyedPage(req.GetAfter(), req.GetHasAfter(), pageBudget(req.GetMaxBytes()),
			func(e *fsmcpv1.TreeEntry) []byte { return e.Path },
			func(e *fsmcpv1.TreeEntry) int64 { return int64(len(e.Path)) + treeAllowance },
			func(e *fsmcpv1.TreeEntry) *fsmcpv1.TreeEntry { return e })}
	if err := w.dir(int(t.dir.Fd()), "", 1); err != nil {
		return fsError(op, t.prefix, err)
	}
	entries, more := w.page.result()
	return stream.Send(&fsmcpv1.TreeResponse{Entries: entries, More: more, Done: true, Total: w.total, Errors: errs + w.errors})
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

// skipLog collects, from rg's --debug lines, the paths its walk skipped by
// a rule, as rg printed them (lossily, if not UTF-8) without "./".
type skipLog struct {
	mu      sync.Mutex
	names   map[string]bool
	pending []byte
}

func (l *skipLog) line(b []byte) {
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
		l.names[string(rest[:j])] = true
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

// treeWalk walks the subtree through descriptors.
type treeWalk struct {
	ctx      context.Context
	t        *searchTarget
	files    map[string]bool
	skipped  map[string]bool
	maxDepth int
	page     *keyedPage[*fsmcpv1.TreeEntry]
	total    int64
	errors   int64
}

// dir lists the directory fd, whose path below the target is rel, at
// depth (its entries' depth).
func (w *treeWalk) dir(fd int, rel string, depth int) error {
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	for {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		ents, rerr := f.ReadDir(512)
		for _, e := range ents {
			if err := w.entry(fd, rel, e, depth); err != nil {
				return err
			}
		}
		if rerr != nil || len(ents) == 0 {
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				w.errors++
			}
			return nil
		}
	}
}

func (w *treeWalk) entry(fd int, rel string, e os.DirEntry, depth int) error {
	name := e.Name()
	if isTempName(name) {
		return nil
	}
	p := joinRel(rel, name)
	if w.skipped[lossy(p)] {
		return nil
	}
	ent := &fsmcpv1.TreeEntry{Path: []byte(w.display(p))}
	switch {
	case e.Type().IsRegular():
		if !w.files[p] {
			return nil // rg did not list it
		}
		st, err := fstatat(fd, name)
		if err != nil {
			return nil // gone since
		}
		if fileType(st.Mode) != fsmcpv1.FileType_FILE_TYPE_FILE {
			return nil
		}
		ent.Type, ent.Size = fsmcpv1.FileType_FILE_TYPE_FILE, st.Size
	case e.IsDir():
		ent.Type = fsmcpv1.FileType_FILE_TYPE_DIRECTORY
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			return nil // gone, or no longer a directory
		case err != nil:
			w.errors++
		case depth < w.maxDepth:
			err = w.dir(sub, p, depth+1)
			unix.Close(sub)
			if err != nil {
				return err
			}
		default:
			ent.More = w.hasListed(sub, p)
			unix.Close(sub)
		}
	default:
		st, err := fstatat(fd, name)
		if err != nil {
			return nil
		}
		ent.Type = fileType(st.Mode)
	}
	w.total++
	w.page.add(ent)
	return nil
}

// display is how the entry at p below the target is named: relative to
// the root, as the client spelled the target.
func (w *treeWalk) display(p string) string {
	if w.t.prefix == "" {
		return p
	}
	return w.t.prefix + "/" + p
}

// hasListed reports whether the directory fd, at p and at the depth
// limit, holds a name the listing would show one level deeper: a file rg
// listed there, or any other name no rule skipped.
func (w *treeWalk) hasListed(fd int, p string) bool {
	dup, err := unix.Dup(fd)
	if err != nil {
		return false
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	for {
		ents, err := f.ReadDir(64)
		for _, e := range ents {
			q := joinRel(p, e.Name())
			if isTempName(e.Name()) || w.skipped[lossy(q)] {
				continue
			}
			if !e.Type().IsRegular() || w.files[q] {
				return true
			}
		}
		if err != nil || len(ents) == 0 {
			return false
		}
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
