package worker

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/paging"
	"github.com/fsmcp/fsmcp/worker/internal/rgargs"
	"github.com/fsmcp/fsmcp/worker/internal/rglog"
	"github.com/fsmcp/fsmcp/worker/internal/treewalk"
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
	ds := treewalk.New(stream.Context(), int(t.dir.Fd()), depth, tempPrefix)
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
			ds.Above(rel)
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
		ds.Stop()
		return rgErr
	}
	errs, err := run.result(opts)
	if err != nil {
		ds.Stop()
		return err
	}
	listed, unreadable, err := ds.Finish(stream.Context(), log, t.prefix, more, page.Add)
	if err != nil {
		return fsError(op, t.prefix, err)
	}
	total, errs := files+listed, errs+unreadable
	entries, truncated := page.Result()
	entries, gone := treewalk.Sizes(int(t.dir.Fd()), t.prefix, entries)
	return stream.Send(&fsmcpv1.TreeResponse{Entries: entries, More: truncated, Done: true, Total: total - gone, Errors: errs})
}
