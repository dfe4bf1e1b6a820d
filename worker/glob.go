package worker

import (
	"bufio"
	"fmt"
	"io"
	"slices"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/paging"
	"github.com/fsmcp/fsmcp/worker/internal/rgargs"
	"google.golang.org/grpc"
)

// Glob implements fsmcpv1.WorkerServiceServer: rg --files with the pattern
// as a glob, paths sorted by bytes, one page after req.After.
func (s *Service) Glob(req *fsmcpv1.GlobRequest, stream grpc.ServerStreamingServer[fsmcpv1.GlobResponse]) error {
	const op = "glob"
	if err := checkArg(op, "pattern", req.GetPattern()); err != nil {
		return err
	}
	t, err := s.openSearch(stream.Context(), op, req.GetPath(), accessMeta)
	if err != nil {
		return err
	}
	defer t.close()
	if t.file != nil {
		// rg lists a file named as a path whatever the glob says.
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY, t.prefix, "%s: not a directory", op)
	}
	if req.GetMaxDepth() < 0 {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "%s: max_depth must not be negative", op)
	}
	for _, g := range req.GetExcludes() {
		if err := checkArg(op, "exclude", g); err != nil {
			return err
		}
	}
	opts := rgargs.Glob(req)
	args := t.pathArgs(slices.Clip(opts))

	byMtime := req.GetSort() == fsmcpv1.ListingSort_LISTING_SORT_MTIME
	page := paging.NewPaths(req.GetAfter(), req.GetHasAfter(), paging.Budget(req.GetMaxBytes()))
	if byMtime {
		page = paging.NewMtime(req.GetAfter(), req.GetAfterMtimeUnixNano(), req.GetHasAfter(), paging.Budget(req.GetMaxBytes()))
	}
	run := s.newRG(stream.Context(), op, t, func(p *fsmcpv1.Progress) error {
		return stream.Send(&fsmcpv1.GlobResponse{Progress: p})
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
			p, ok := t.display(name[:len(name)-1])
			if !ok {
				continue
			}
			if byMtime {
				if p, ok = s.mtimeKey(p); !ok {
					continue // removed since rg listed it
				}
			}
			run.files.Add(1)
			page.Add(p)
		}
	}
	if err := run.run(args, consume); err != nil {
		return err
	}
	errs, err := run.result(opts)
	if err != nil {
		return err
	}
	paths, more := page.Result()
	resp := &fsmcpv1.GlobResponse{More: more, Done: true, Total: run.files.Load(), Errors: errs}
	if byMtime {
		resp.Paths = make([][]byte, len(paths))
		resp.MtimesUnixNano = make([]int64, len(paths))
		for i, k := range paths {
			resp.MtimesUnixNano[i], resp.Paths[i] = paging.SplitMtimeKey(k)
		}
	} else {
		resp.EntriesJson, resp.EntryEnds = paging.Objects(paths)
	}
	return stream.Send(resp)
}

// mtimeKey returns the sort key of the root-relative path p, lstat'ed
// through the Root, or false if p is gone.
func (s *Service) mtimeKey(p []byte) ([]byte, bool) {
	st, err := s.lstat(string(p))
	if err != nil {
		return nil, false
	}
	return paging.MtimeKey(st.Mtim.Nano(), p), true
}
