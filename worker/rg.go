package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/rgargs"
	"github.com/fsmcp/fsmcp/worker/internal/rgproc"
)

// Glob and Grep run rg as a child of the worker, so it inherits the
// worker's Landlock domain and seccomp filter: whatever rg is asked, the
// kernel refuses it anything outside the root.
//
// They do not change rg's own semantics: a --glob that names a file
// re-includes it even when it is hidden or ignored (rg documents that globs
// override every other ignore rule), and ignore files above the searched
// directory are not consulted, even inside the root. What they do
// guarantee: the client's pattern and globs reach rg only as option values
// (--regexp=, --glob=), and its path never does: the path is resolved
// through the os.Root, and rg runs in the directory that opened and
// searches "." (or the one regular file, through an inherited descriptor).
// rg gets no configuration file, no environment, /dev/null as stdin, and
// never follows symlinks; temp files of atomic writes are never searched
// or shown; and each rg is killed, with its process group, when its call
// ends.

const (
	// progressEvery is how often a running search reports progress, and
	// how long it runs before it first does.
	progressEvery = 250 * time.Millisecond
	// maxSearchTime bounds a search whose caller set no deadline.
	maxSearchTime = 10 * time.Minute
	// tempGlob excludes the temp files of atomic writes. It is passed
	// after the client's globs because in rg the last matching glob
	// wins, so no client glob can re-include them.
	tempGlob = "--glob=!" + tempPrefix + "*"
)

// searchTarget is the resolved path argument of a search: the directory rg
// runs in, and the single regular file it searches, if the path named one.
type searchTarget struct {
	dir  *os.File
	file *os.File
	// prefix is the root-relative path of dir ("" for the root), or of
	// file when file is set, as the client spelled it.
	prefix string
	// rel is the real root-relative path of dir, or of file when file
	// is set (resolve.go).
	rel string
	// deny, when set, drops every result whose real path it denies, and
	// passes rg the deny rules as exclusions.
	deny *sandbox.Matcher
	// linkDenied, with deny, also drops a result that is another name
	// of a remembered denied file (links.go).
	linkDenied func(rgPath []byte) bool
	// debug, when set, receives each line rg writes to stderr that
	// starts with "DEBUG|" (rg --debug); the others are rg's errors.
	debug func(line []byte)
}

func (t *searchTarget) close() {
	t.dir.Close()
	if t.file != nil {
		t.file.Close()
	}
}

// fileArg is how rg names the single file: the descriptor it inherits as
// fd 3 (ExtraFiles[0]). Reopening it through /proc reaches exactly the
// inode the worker checked, with no path string to swap.
const fileArg = "/proc/self/fd/3"

// displayPrefix is how results under p are named. "." and redundant
// slashes go; a path with ".." is kept as the client wrote it, because
// through a symlink "a/.." need not be the directory that holds a, and
// the client's own path is the one known to resolve.
func displayPrefix(p string) string {
	p = strings.TrimRight(p, "/")
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return p
		}
	}
	if p = path.Clean(p); p == "." || p == "/" {
		return ""
	}
	return p
}

// display turns a path as rg printed it into one relative to the root, and
// reports false for a path that must not be shown. The result may share
// rgPath's memory.
func (t *searchTarget) display(rgPath []byte) ([]byte, bool) {
	if t.file != nil {
		return []byte(t.prefix), true
	}
	rel := bytes.TrimPrefix(rgPath, []byte("./"))
	if hasTempComponent(rel) {
		return nil, false
	}
	if t.deny != nil {
		if _, denied := t.deny.Denied(joinRel(t.rel, string(rel))); denied || t.linkDenied(rel) {
			return nil, false
		}
	}
	if t.prefix == "" {
		return rel, true
	}
	out := make([]byte, 0, len(t.prefix)+1+len(rel))
	return append(append(append(out, t.prefix...), '/'), rel...), true
}

// hasTempComponent reports whether a component of p is a temp file's name.
func hasTempComponent(p []byte) bool {
	for {
		if bytes.HasPrefix(p, []byte(tempPrefix)) {
			return true
		}
		i := bytes.IndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[i+1:]
	}
}

// pathArgs ends an argument list: the temp-file exclusion last among the
// globs, then "--", then the target, so that nothing after "--" is an
// option.
func (t *searchTarget) pathArgs(args []string) []string {
	args = append(args, tempGlob)
	if t.deny != nil && t.file == nil {
		args = append(args, t.deny.RGExcludes(t.rel)...)
	}
	args = append(args, "--")
	if t.file != nil {
		return append(args, fileArg)
	}
	return append(args, ".")
}

// checkArg refuses a pattern, glob or type that cannot reach rg as an
// argument (rgargs.Check).
func checkArg(op, what, v string) error {
	if err := rgargs.Check(v); err != nil {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "%s: %s %v", op, what, err)
	}
	return nil
}

// rgRun is one rg process of a search: what the search counted while rg
// ran, which it reports as progress, and how rg ended.
type rgRun struct {
	s   *Service
	ctx context.Context
	op  string
	t   *searchTarget
	// files and matches are the search's counts so far (files listed or
	// searched, matching lines); send, when set, reports them.
	files, matches atomic.Int64
	send           func(*fsmcpv1.Progress) error
	sent           [2]int64
	exit           int
	// stderr holds the first bytes rg wrote there; stderrLines counts
	// all of its lines.
	stderr      []byte
	stderrLines int64
}

// newRG prepares an rg run of a search on t; send, when not nil, reports
// its progress.
func (s *Service) newRG(ctx context.Context, op string, t *searchTarget, send func(*fsmcpv1.Progress) error) *rgRun {
	return &rgRun{s: s, ctx: ctx, op: op, t: t, send: send, sent: [2]int64{-1, -1}}
}

// progress sends the counts when they changed since it last did.
func (r *rgRun) progress() error {
	f, m := r.files.Load(), r.matches.Load()
	if r.send == nil || r.sent == [2]int64{f, m} {
		return nil
	}
	r.sent = [2]int64{f, m}
	return r.send(&fsmcpv1.Progress{FilesSearched: f, Matches: m})
}

// result classifies rg's exit status, once it has run with opts (the
// arguments without the target). 0 and 1 are a result. 2 is "some
// error": the client's arguments, which checkArgs answers as
// invalid_argument, or paths rg could not read while it went on with the
// others, whose count (the lines rg wrote to stderr) is returned.
// Anything else left no usable result.
func (r *rgRun) result(opts []string) (unreadable int64, err error) {
	switch r.exit {
	case 0, 1:
		return 0, nil
	case 2:
		if err := r.s.checkArgs(r.ctx, r.op, r.t, opts); err != nil {
			return 0, err
		}
		return r.stderrLines, nil
	default:
		return 0, r.failure()
	}
}

// run runs rg with args (rgproc.Run) on one rg-process slot. consume
// reads rg's stdout to its end; progress is reported every progressEvery
// while it runs. When the search's context ends, or consume or sending
// progress fails, rg's whole process group is killed; run returns only
// after rg has been reaped.
func (r *rgRun) run(args []string, consume func(io.Reader) error) error {
	s, ctx, op, t := r.s, r.ctx, r.op, r.t
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, maxSearchTime)
		defer cancel()
	}
	done, err := s.rgSlot(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	res, err := rgproc.Run(ctx, rgproc.Cmd{Path: s.rg, Args: args, Stdin: s.devNull, Dir: t.dir, File: t.file,
		Debug: t.debug, Consume: consume, Tick: r.progress, Every: progressEvery})
	var start *rgproc.StartError
	var tick *rgproc.TickError
	var read *rgproc.ConsumeError
	var wait *rgproc.WaitError
	switch {
	case err == nil:
		r.exit, r.stderr, r.stderrLines = res.Exit, res.Stderr, res.StderrLines
		return nil
	case errors.As(err, &start):
		// Out of descriptors, processes or memory is unavailable (retry),
		// with the errno's reason; anything else is a bug.
		if code, reason := link.Classify(start.Err); code == fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE {
			return newError(code, "", "%s: cannot start rg: %s", op, reason)
		}
		fmt.Fprintf(os.Stderr, "fsmcp worker: %v\n", err)
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "%s: cannot start rg", op)
	case errors.As(err, &tick):
		return fsError(op, "", tick.Err)
	case errors.As(err, &read):
		fmt.Fprintf(os.Stderr, "fsmcp worker: %s: %v\n", op, err)
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "%s: unreadable output from rg", op)
	case errors.As(err, &wait):
		fmt.Fprintf(os.Stderr, "fsmcp worker: %s: %v\n", op, err)
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "%s: rg failed", op)
	}
	return fsError(op, "", err)
}

// failure answers an rg exit status that left no usable result and that
// the client's arguments did not cause (checkArgs): a bug or a fault of
// the machine, logged with rg's stderr, which may name host paths.
func (r *rgRun) failure() error {
	op := r.op
	fmt.Fprintf(os.Stderr, "fsmcp worker: %s: rg exited with status %d: %s\n", op, r.exit, strings.TrimSpace(string(r.stderr)))
	return newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "%s: rg failed", op)
}

// checkArgs tells whether rg's exit status 2 came from the client's
// arguments. It runs rg again with the same options on an empty stdin
// (/dev/null) instead of the tree: no directory is walked, so no ignore
// file is read and nothing is unreadable, and exit status 2 can only mean
// that a pattern, glob or type was refused. That is invalid_argument,
// with rg's reason, which then repeats only the client's own arguments.
// rg's words are never matched: a .ignore file with a bad glob, a file
// named "regex", a message in another version's wording all stay what
// they are.
func (s *Service) checkArgs(ctx context.Context, op string, t *searchTarget, opts []string) error {
	args := append(slices.Clip(opts), tempGlob, "--", "-")
	discard := func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }
	// The same directory and file, without the caller's --debug reader:
	// the probe's debug lines are not the search's, and are dropped, so
	// that the reason is rg's error alone.
	probe := *t
	probe.debug = nil
	if slices.Contains(opts, "--debug") {
		probe.debug = func([]byte) {}
	}
	run := s.newRG(ctx, op, &probe, nil)
	if err := run.run(args, discard); err != nil {
		return err
	}
	if run.exit == 2 {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "%s: %s", op, strings.TrimSpace(string(run.stderr)))
	}
	return nil
}
