// Package admit bounds the work the worker takes on at once. Limits are
// the budgets, from the trusted command line; a Limiter admits units
// (processes, calls, bytes) up to a capacity, first come first served, and
// a call that finds it full waits at most a queue timeout. ReleaseAfterReply holds a reservation of the bytes of a reply
// until gRPC has encoded and sent it. It bounds only what callers reserve:
// it does not see what gRPC allocates before a handler runs.
package admit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/stats"
)

// Limiter admits work up to a capacity, in units (processes, calls or
// bytes), first come first served. A call that finds it full waits, at
// most its queue timeout or its own deadline, whichever comes first; then
// it is refused (the worker is busy: retry), or its deadline passes.
//
// It is the one admission mechanism of the worker: rg processes, heavy
// calls and the memory budget are three Limiters, and a new tool that
// runs a process or holds a file's bytes takes from them.
type Limiter struct {
	what     string
	capacity int64
	queue    time.Duration
	sem      *semaphore.Weighted
}

// New returns a Limiter of capacity units; what names them in refusals
// ("rg processes").
func New(what string, capacity int64, queue time.Duration) *Limiter {
	return &Limiter{what: what, capacity: capacity, queue: queue, sem: semaphore.NewWeighted(capacity)}
}

// TooLargeError refuses more units than the whole capacity.
type TooLargeError struct {
	What     string
	Capacity int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("needs more than the %d %s", e.Capacity, e.What)
}

// BusyError is a Limiter that stayed full for the whole queue timeout.
type BusyError struct {
	What     string
	Capacity int64
	Queue    time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("all %d %s in use for %v", e.Capacity, e.What, e.Queue)
}

// Acquire takes n units and returns their release. n larger than the whole
// capacity can never be had: a *TooLargeError at once. A call that waits
// past its queue timeout gets a *BusyError; one whose ctx ends first, the
// context's error.
func (l *Limiter) Acquire(ctx context.Context, n int64) (func(), error) {
	if n > l.capacity {
		return nil, &TooLargeError{What: l.what, Capacity: l.capacity}
	}
	if n <= 0 {
		return func() {}, nil
	}
	release := func() { l.sem.Release(n) }
	if l.sem.TryAcquire(n) {
		return release, nil
	}
	qctx, cancel := context.WithTimeout(ctx, l.queue)
	defer cancel()
	if err := l.sem.Acquire(qctx, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &BusyError{What: l.what, Capacity: l.capacity, Queue: l.queue}
	}
	return release, nil
}

// ReleaseAfterReply is the worker's gRPC stats handler: each RPC's
// context carries a replyHold, whose releases run when the RPC has ended
// (stats.End, after the reply was encoded and queued for the transport).
type ReleaseAfterReply struct{}

type replyHoldKey struct{}

// AfterReply is release, deferred to the end of the RPC ctx belongs to
// when ctx comes from a server with ReleaseAfterReply; outside one, it is
// release itself.
func AfterReply(ctx context.Context, release func()) func() {
	h, _ := ctx.Value(replyHoldKey{}).(*replyHold)
	if h == nil {
		return release
	}
	return func() { h.add(release) }
}

type replyHold struct {
	mu  sync.Mutex
	fns []func()
}

func (h *replyHold) add(f func()) {
	h.mu.Lock()
	h.fns = append(h.fns, f)
	h.mu.Unlock()
}

// TagRPC gives each RPC its hold.
func (ReleaseAfterReply) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, replyHoldKey{}, &replyHold{})
}

// HandleRPC runs the releases held for an RPC once it has ended.
func (ReleaseAfterReply) HandleRPC(ctx context.Context, st stats.RPCStats) {
	if _, end := st.(*stats.End); !end {
		return
	}
	if h, _ := ctx.Value(replyHoldKey{}).(*replyHold); h != nil {
		h.release()
	}
}

// Hold gives ctx a hold of its own, for a call that is not an RPC of its
// own (one of the Calls stream's): AfterReply then defers to release,
// which the caller runs once that call's reply was handed to the stream.
func Hold(ctx context.Context) (held context.Context, release func()) {
	h := &replyHold{}
	return context.WithValue(ctx, replyHoldKey{}, h), h.release
}

// release runs the releases added so far.
func (h *replyHold) release() {
	h.mu.Lock()
	fns := h.fns
	h.fns = nil
	h.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// TagConn and HandleConn do nothing.
func (ReleaseAfterReply) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (ReleaseAfterReply) HandleConn(context.Context, stats.ConnStats) {}
