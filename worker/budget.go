package worker

import (
	"context"
	"errors"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
)

// Limits are the worker's per-process budgets (Options.Limits), from the
// trusted command line; admit.Limits documents each field.
type Limits = admit.Limits

// DefaultMemoryFor is the worker's memory budget when none is given: half
// of avail (memoryShare), the memory available to fsmcp when it starts
// (the smaller of its cgroup's limit and MemAvailable; 0 if unknown),
// between 64 MiB and admit.DefaultMemoryBytes. The other half is the
// front-end's, rg's and the page cache's.
func DefaultMemoryFor(avail int64) int64 {
	if avail <= 0 {
		return admit.DefaultMemoryBytes
	}
	return min(max(avail/memoryShare, admit.MinMemoryBytes), admit.DefaultMemoryBytes)
}

// acquire takes n units of l for the call op on path p (admit.Limiter),
// refusing with too_large what l can never hold, with unavailable when l
// stays full for its queue timeout.
func acquire(ctx context.Context, l *admit.Limiter, op, p string, n int64) (func(), error) {
	release, err := l.Acquire(ctx, n)
	var big *admit.TooLargeError
	var busy *admit.BusyError
	switch {
	case err == nil:
		return release, nil
	case errors.As(err, &big):
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p,
			"%s: needs %d of the worker's %d %s", op, n, big.Capacity, big.What)
	case errors.As(err, &busy):
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, p,
			"%s: the worker is busy (all %d %s in use for %v); try again", op, busy.Capacity, busy.What, busy.Queue)
	}
	return nil, fsError(op, p, err)
}

// budgets are a Service's three Limiters and its file bound.
type budgets struct {
	maxFile int64
	rg      *admit.Limiter
	heavy   *admit.Limiter
	memory  *admit.Limiter
}

func newBudgets(l admit.Limits) budgets {
	return budgets{
		maxFile: l.MaxFileBytes,
		rg:      admit.New("rg processes", int64(l.MaxRG), l.QueueTimeout),
		heavy:   admit.New("heavy calls", int64(l.MaxHeavy), l.QueueTimeout),
		memory:  admit.New("bytes of memory budget", l.MemoryBytes-admit.MemoryReserve, l.QueueTimeout),
	}
}

// checkFileSize refuses, with too_large, content of n bytes that op would
// read into memory or produce: every edit tool calls it before it
// allocates.
func (s *Service) checkFileSize(op, p string, n int64) error {
	if n > s.budgets.maxFile {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p,
			"%s: the result would be %d bytes, over the limit of %d (--max-file-bytes); nothing was written", op, n, s.budgets.maxFile)
	}
	return nil
}

// reserve takes n bytes of the worker's memory budget for as long as op
// holds them: a caller reserves before it allocates and releases once the
// bytes are garbage.
func (s *Service) reserve(ctx context.Context, op, p string, n int64) (func(), error) {
	return acquire(ctx, s.budgets.memory, op, p, n)
}

// reserveReply is reserve for bytes that leave in the RPC's reply: gRPC
// encodes the reply (a second copy) after the handler returned, so the
// release, which the caller defers as usual, takes effect only when the
// RPC has ended (admit.ReleaseAfterReply), its reply encoded and handed to the
// transport. Called outside a gRPC server, the release is immediate.
func (s *Service) reserveReply(ctx context.Context, op, p string, n int64) (func(), error) {
	release, err := s.reserve(ctx, op, p, n)
	if err != nil {
		return nil, err
	}
	return admit.AfterReply(ctx, release), nil
}

// heavy takes one heavy-call slot for op. A call takes at most one, at its
// start: one that holds a slot must not take another (hashOpen takes one),
// or calls holding every slot could wait on each other until their queue
// timeout.
//
// It also gives the process every processor while the slot is held
// (procs.go): a hash on the Calls stream is not a small call.
func (s *Service) heavy(ctx context.Context, op, p string) (func(), error) {
	done, err := acquire(ctx, s.budgets.heavy, op, p, 1)
	if err != nil {
		return nil, err
	}
	release := s.procs.hold()
	return func() { release(); done() }, nil
}

// rgSlot takes one rg-process slot for op; whoever starts a child process
// (rg, an external command) holds one while it runs.
func (s *Service) rgSlot(ctx context.Context, op string) (func(), error) {
	return acquire(ctx, s.budgets.rg, op, "", 1)
}
