package worker

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/grpc"
)

// grepByFile runs a search whose output is per file (fs_grep output
// "files" or "count"; opts are args without the target): rg --count, one "path NUL count" line per file with
// a match, paged by path like fs_glob. The totals count every file, not
// only the page's.
func (s *Service) grepByFile(req *fsmcpv1.GrepRequest, t *searchTarget, opts, args []string,
	stream grpc.ServerStreamingServer[fsmcpv1.GrepResponse]) error {
	const op = "grep"
	page := newKeyedPage(req.GetAfterPath(), req.GetHasAfter(), pageBudget(req.GetMaxBytes()),
		func(fc *fsmcpv1.FileCount) []byte { return fc.Path },
		func(fc *fsmcpv1.FileCount) int64 { return int64(len(fc.Path)) + pathAllowance + 24 },
		func(fc *fsmcpv1.FileCount) *fsmcpv1.FileCount {
			return &fsmcpv1.FileCount{Path: bytes.Clone(fc.Path), Count: fc.Count}
		})
	var files, matches atomic.Int64
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
			files.Add(1)
			matches.Add(n)
			fc.Path, fc.Count = p, n
			page.add(&fc)
		}
	}
	run, err := s.runRG(stream.Context(), op, t, args, consume, grepProgress(stream, &files, &matches))
	if err != nil {
		return err
	}
	var errs int64
	switch {
	case run.exit == 0 || run.exit == 1:
	case run.exit == 2:
		// The client's arguments, or files rg could not read (checkArgs).
		if err := s.checkArgs(stream.Context(), op, t, opts); err != nil {
			return err
		}
		errs = run.stderrLines
	default:
		return run.failure(op)
	}
	counts, more := page.result()
	return stream.Send(&fsmcpv1.GrepResponse{Files: counts, More: more, Done: true,
		FilesSearched: files.Load(), Matches: matches.Load(), Errors: errs})
}
