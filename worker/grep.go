package worker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/paging"
	"github.com/fsmcp/fsmcp/worker/internal/rgargs"
	"github.com/fsmcp/fsmcp/worker/internal/rgjson"
	"google.golang.org/grpc"
)

const (
	// maxLineText bounds the text of one line held and returned.
	maxLineText = 64 << 10
	// maxSubmatches bounds the submatches returned for one line.
	maxSubmatches = 256
)

// Grep implements fsmcpv1.WorkerServiceServer: rg --json, parsed as
// events, lines sorted by path and then offset, one page after the
// request's position.
func (s *Service) Grep(req *fsmcpv1.GrepRequest, stream grpc.ServerStreamingServer[fsmcpv1.GrepResponse]) error {
	const op = "grep"
	if err := checkArg(op, "pattern", req.GetPattern()); err != nil {
		return err
	}
	for _, g := range req.GetGlobs() {
		if err := checkArg(op, "glob", g); err != nil {
			return err
		}
	}
	if req.GetMaxCount() < 0 || req.GetContext() < 0 {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "%s: max_count and context must not be negative", op)
	}
	t, err := s.openSearch(stream.Context(), op, req.GetPath(), accessContent)
	if err != nil {
		return err
	}
	defer t.close()
	if err := checkArg(op, "type", req.GetType()); err != nil {
		return err
	}
	if req.GetBefore() < 0 || req.GetAfter() < 0 {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "%s: before and after must not be negative", op)
	}
	byFile := req.GetOutput() == fsmcpv1.GrepOutput_GREP_OUTPUT_FILES || req.GetOutput() == fsmcpv1.GrepOutput_GREP_OUTPUT_COUNT
	opts := rgargs.Grep(req, byFile)
	args := t.pathArgs(slices.Clip(opts))
	if byFile {
		return s.grepByFile(req, t, opts, args, stream)
	}

	budget := paging.Budget(req.GetMaxBytes())
	page := paging.NewLines(req.GetAfterPath(), req.GetAfterOffset(), req.GetHasAfter(), budget, t.display)
	maxText := int(min(max(budget/4, 256), maxLineText))
	run := s.newRG(stream.Context(), op, t, grepProgress(stream))
	var sawSummary bool
	consume := func(r io.Reader) error {
		rd := rgjson.NewReader(r, maxText, maxSubmatches)
		var ev rgjson.Event
		// rg writes each file's messages together, from its begin to its
		// end: while the current file's lines cannot be kept, only their
		// type is decoded, to count them.
		var cur *paging.Block
		passOver := func(typ rgjson.Type) bool {
			return (typ == rgjson.Match || typ == rgjson.Context) && cur != nil && !cur.Keeps()
		}
		for {
			err := rd.Next(&ev, passOver)
			if err == io.EOF {
				page.CloseAll()
				return nil
			}
			if err != nil {
				return err
			}
			if ev.PassedOver {
				// Counted, not kept.
				if ev.Type == rgjson.Match && cur.Shown() {
					run.matches.Add(1)
				}
				continue
			}
			switch ev.Type {
			case rgjson.Begin:
				cur = page.Block(ev.Path)
			case rgjson.Match, rgjson.Context:
				if !ev.HasPath {
					return errors.New("a line without a path")
				}
				if !page.Line(&ev) {
					continue
				}
				if ev.Type == rgjson.Match {
					run.matches.Add(1)
				}
			case rgjson.End:
				cur = nil
				if page.End(ev.Path) {
					run.files.Add(1)
				}
			case rgjson.Summary:
				sawSummary = true
			}
		}
	}
	if err := run.run(args, consume); err != nil {
		return err
	}
	errs, err := run.result(opts)
	if err != nil {
		return err
	}
	if run.exit == 2 && !sawSummary {
		// rg stopped before its summary, for no reason of the client's.
		return run.failure()
	}
	lines, more := page.Result()
	return stream.Send(&fsmcpv1.GrepResponse{Lines: lines, More: more, Done: true,
		FilesSearched: run.files.Load(), Matches: run.matches.Load(), Errors: errs})
}

// grepProgress sends a search's progress on stream.
func grepProgress(stream grpc.ServerStreamingServer[fsmcpv1.GrepResponse]) func(*fsmcpv1.Progress) error {
	return func(p *fsmcpv1.Progress) error { return stream.Send(&fsmcpv1.GrepResponse{Progress: p}) }
}

// grepByFile runs a search whose output is per file (fs_grep output
// "files" or "count"; opts are args without the target): rg --count, one "path NUL count" line per file with
// a match, paged by path like fs_glob. The totals count every file, not
// only the page's.
func (s *Service) grepByFile(req *fsmcpv1.GrepRequest, t *searchTarget, opts, args []string,
	stream grpc.ServerStreamingServer[fsmcpv1.GrepResponse]) error {
	const op = "grep"
	page := paging.NewKeyed(req.GetAfterPath(), req.GetHasAfter(), paging.Budget(req.GetMaxBytes()),
		func(fc *fsmcpv1.FileCount) []byte { return fc.Path },
		func(fc *fsmcpv1.FileCount) int64 { return int64(len(fc.Path)) + paging.PathAllowance + 24 },
		func(fc *fsmcpv1.FileCount) *fsmcpv1.FileCount {
			return &fsmcpv1.FileCount{Path: bytes.Clone(fc.Path), Count: fc.Count}
		})
	run := s.newRG(stream.Context(), op, t, grepProgress(stream))
	consume := func(r io.Reader) error {
		br := bufio.NewReaderSize(r, 64<<10)
		var fc fsmcpv1.FileCount
		for {
			name, err := br.ReadSlice(0)
			if err == io.EOF && len(name) == 0 {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read a path: %w", err)
			}
			p, ok := t.display(name[:len(name)-1])
			if ok {
				// display may share br's buffer, which the count's read
				// overwrites.
				p = bytes.Clone(p)
			}
			num, err := br.ReadSlice('\n')
			if err != nil {
				return fmt.Errorf("read a count: %w", err)
			}
			n, err := strconv.ParseInt(string(num[:len(num)-1]), 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("a count that is not a number: %q", num)
			}
			if !ok {
				continue
			}
			run.files.Add(1)
			run.matches.Add(n)
			fc.Path, fc.Count = p, n
			page.Add(&fc)
		}
	}
	if err := run.run(args, consume); err != nil {
		return err
	}
	errs, err := run.result(opts)
	if err != nil {
		return err
	}
	counts, more := page.Result()
	return stream.Send(&fsmcpv1.GrepResponse{Files: counts, More: more, Done: true,
		FilesSearched: run.files.Load(), Matches: run.matches.Load(), Errors: errs})
}
