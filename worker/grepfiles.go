package worker

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/paging"
	"google.golang.org/grpc"
)

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
