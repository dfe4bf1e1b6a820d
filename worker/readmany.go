package worker

import (
	"context"
	"errors"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

const (
	// maxReadMany bounds the reads of one ReadMany.
	maxReadMany = 64
	// readManyParallel is how many of them run at once: enough to
	// overlap their waits, few enough to leave the worker to other calls.
	readManyParallel = 4
)

// ReadMany implements fsmcpv1.WorkerServiceServer: each read exactly as
// Read would do it (the resolver, policy, the version checks), a few at a
// time, in the order asked. A read that fails carries its own error; the
// call fails only when the request itself is wrong or the call ends.
func (s *Service) ReadMany(ctx context.Context, req *fsmcpv1.ReadManyRequest) (*fsmcpv1.ReadManyResponse, error) {
	reads := req.GetReads()
	if len(reads) == 0 || len(reads) > maxReadMany {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "read many: 1 to %d paths", maxReadMany)
	}
	results := make([]*fsmcpv1.ReadManyResult, len(reads))
	slots := make(chan struct{}, readManyParallel)
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			resp, err := s.Read(ctx, r)
			results[i] = &fsmcpv1.ReadManyResult{Read: resp}
			if err != nil {
				results[i] = &fsmcpv1.ReadManyResult{Error: errorDetail(err)}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fsError("read many", "", err)
	}
	return &fsmcpv1.ReadManyResponse{Results: results}, nil
}

// errorDetail is err as an fsmcp.v1.Error.
func errorDetail(err error) *fsmcpv1.Error {
	var e *Error
	if !errors.As(err, &e) {
		e = fsError("read", "", err)
	}
	return e.Detail()
}
