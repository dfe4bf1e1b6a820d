package worker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/stats"
)

// Limits are the worker's per-process budgets. They come from the trusted
// command line, never from an RPC. A zero field takes its default.
//
// They do not bound what gRPC itself allocates before a handler runs: a
// request message (at most link.MaxMessageBytes) is decoded whole before the
// worker can look at it. The front-end bounds the calls it has in flight.
type Limits struct {
	// MaxFileBytes is the largest file an edit may read into memory or
	// produce: fs_replace (and every edit tool) refuses, with too_large and
	// before allocating, a result larger than this. At most half of
	// MemoryBytes, so that the old and the new content fit together.
	MaxFileBytes int64
	// MemoryBytes is the worker's soft memory limit (runtime/debug) and
	// the capacity of its memory budget: calls reserve what they are about
	// to hold, and one that would exceed it waits (QueueTimeout at most),
	// then fails with unavailable.
	MemoryBytes int64
	// MaxRG bounds the rg processes running at once.
	MaxRG int
	// MaxHeavy bounds the calls doing work proportional to a file or a tree
	// (writes, edits, recursive deletes, mkdir, hashing) at once.
	MaxHeavy int
	// QueueTimeout bounds how long a call waits for a slot or for memory
	// before it is answered unavailable (or timeout, if its own deadline
	// comes first).
	QueueTimeout time.Duration
}

// Default limits, sized for a small machine (the reference has 2 cores).
const (
	DefaultMemoryBytes  = 1 << 30
	DefaultQueueTimeout = 10 * time.Second
	// memoryReserve is what the worker needs besides its budgeted work:
	// runtime, gRPC buffers, stacks, caches.
	memoryReserve = 32 << 20
)

// minMemoryBytes is the smallest memory budget a worker runs with.
const minMemoryBytes = 64 << 20

// DefaultMemoryFor is the worker's memory budget when none is given: half
// of avail (memoryShare), the memory available to fsmcp when it starts
// (the smaller of its cgroup's limit and MemAvailable; 0 if unknown),
// between 64 MiB and DefaultMemoryBytes. The other half is the
// front-end's, rg's and the page cache's.
func DefaultMemoryFor(avail int64) int64 {
	if avail <= 0 {
		return DefaultMemoryBytes
	}
	return min(max(avail/memoryShare, minMemoryBytes), DefaultMemoryBytes)
}

// DefaultMaxRG is the default bound of rg processes: two per core, at
// least two. Each rg runs up to one search thread per core.
func DefaultMaxRG() int { return max(2, 2*runtime.NumCPU()) }

// DefaultMaxHeavy is the default bound of heavy calls: four per core.
func DefaultMaxHeavy() int { return max(4, 4*runtime.NumCPU()) }

// MaxFileBytesFor is the largest --max-file-bytes a worker with the given
// memory budget can honour: half of what is left after its reserve, and
// never more than one gRPC message.
func MaxFileBytesFor(memoryBytes int64) int64 {
	return min(max((memoryBytes-memoryReserve)/2, 0), link.MaxMessageBytes)
}

// DefaultMaxFileBytes is --max-file-bytes when not given: a quarter of the
// memory budget (two edits of the largest file fit at once), at most one
// gRPC message.
func DefaultMaxFileBytes(memoryBytes int64) int64 {
	return min(max((memoryBytes-memoryReserve)/4, 0), link.MaxMessageBytes)
}

// Check validates l and fills in defaults.
func (l *Limits) Check() error {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.MemoryBytes < minMemoryBytes {
		return fmt.Errorf("worker memory %d is below the minimum %d", l.MemoryBytes, minMemoryBytes)
	}
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = DefaultMaxFileBytes(l.MemoryBytes)
	}
	if m := MaxFileBytesFor(l.MemoryBytes); l.MaxFileBytes < 1 || l.MaxFileBytes > m {
		return fmt.Errorf("max file bytes %d: want 1 to %d (half of worker memory %d less %d, at most %d)",
			l.MaxFileBytes, m, l.MemoryBytes, memoryReserve, link.MaxMessageBytes)
	}
	if l.MaxRG == 0 {
		l.MaxRG = DefaultMaxRG()
	}
	if l.MaxHeavy == 0 {
		l.MaxHeavy = DefaultMaxHeavy()
	}
	if l.MaxRG < 1 || l.MaxHeavy < 1 {
		return fmt.Errorf("max rg %d and max heavy %d must be positive", l.MaxRG, l.MaxHeavy)
	}
	if l.QueueTimeout == 0 {
		l.QueueTimeout = DefaultQueueTimeout
	}
	if l.QueueTimeout < 0 {
		return fmt.Errorf("queue timeout %v must be positive", l.QueueTimeout)
	}
	return nil
}

// Limiter admits work up to a capacity, in units (processes, calls or
// bytes), first come first served. A call that finds it full waits, at
// most its queue timeout or its own deadline, whichever comes first; then
// it is answered unavailable (the worker is busy: retry) or timeout.
//
// It is the one admission mechanism of the worker: rg processes, heavy
// calls and the memory budget are three Limiters, and a new tool that
// runs a process or holds a file's bytes takes from them (Service.RG,
// Service.Heavy, Service.Reserve).
type Limiter struct {
	what     string
	capacity int64
	queue    time.Duration
	sem      *semaphore.Weighted
}

// NewLimiter returns a Limiter of capacity units; what names them in
// refusals ("rg processes").
func NewLimiter(what string, capacity int64, queue time.Duration) *Limiter {
	return &Limiter{what: what, capacity: capacity, queue: queue, sem: semaphore.NewWeighted(capacity)}
}

// Acquire takes n units for the call op on path p and returns their
// release. n larger than the whole capacity can never be had and is
// too_large at once.
func (l *Limiter) Acquire(ctx context.Context, op, p string, n int64) (func(), error) {
	if n > l.capacity {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p,
			"%s: needs %d of the worker's %d %s", op, n, l.capacity, l.what)
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
			return nil, fsError(op, p, ctx.Err())
		}
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, p,
			"%s: the worker is busy (all %d %s in use for %v); try again", op, l.capacity, l.what, l.queue)
	}
	return release, nil
}

// budgets are a Service's three Limiters and its file bound.
type budgets struct {
	maxFile int64
	rg      *Limiter
	heavy   *Limiter
	memory  *Limiter
}

func newBudgets(l Limits) budgets {
	return budgets{
		maxFile: l.MaxFileBytes,
		rg:      NewLimiter("rg processes", int64(l.MaxRG), l.QueueTimeout),
		heavy:   NewLimiter("heavy calls", int64(l.MaxHeavy), l.QueueTimeout),
		memory:  NewLimiter("bytes of memory budget", l.MemoryBytes-memoryReserve, l.QueueTimeout),
	}
}

// CheckFileSize refuses, with too_large, content of n bytes that op would
// read into memory or produce: every edit tool calls it before it
// allocates.
func (s *Service) CheckFileSize(op, p string, n int64) error {
	if n > s.budgets.maxFile {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p,
			"%s: the result would be %d bytes, over the limit of %d (--max-file-bytes); nothing was written", op, n, s.budgets.maxFile)
	}
	return nil
}

// Reserve takes n bytes of the worker's memory budget for as long as op
// holds them: a caller reserves before it allocates and releases once the
// bytes are garbage.
func (s *Service) Reserve(ctx context.Context, op, p string, n int64) (func(), error) {
	return s.budgets.memory.Acquire(ctx, op, p, n)
}

// ReserveReply is Reserve for bytes that leave in the RPC's reply: gRPC
// encodes the reply (a second copy) after the handler returned, so the
// release, which the caller defers as usual, takes effect only when the
// RPC has ended (releaseAfterReply), its reply encoded and handed to the
// transport. Called outside a gRPC server, the release is immediate.
func (s *Service) ReserveReply(ctx context.Context, op, p string, n int64) (func(), error) {
	release, err := s.Reserve(ctx, op, p, n)
	if err != nil {
		return nil, err
	}
	h, _ := ctx.Value(replyHoldKey{}).(*replyHold)
	if h == nil {
		return release, nil
	}
	return func() { h.add(release) }, nil
}

// releaseAfterReply is the worker's gRPC stats handler: each RPC's
// context carries a replyHold, whose releases run when the RPC has ended
// (stats.End, after the reply was encoded and queued for the transport).
type releaseAfterReply struct{}

type replyHoldKey struct{}

type replyHold struct {
	mu  sync.Mutex
	fns []func()
}

func (h *replyHold) add(f func()) {
	h.mu.Lock()
	h.fns = append(h.fns, f)
	h.mu.Unlock()
}

func (releaseAfterReply) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, replyHoldKey{}, &replyHold{})
}

func (releaseAfterReply) HandleRPC(ctx context.Context, st stats.RPCStats) {
	if _, end := st.(*stats.End); !end {
		return
	}
	if h, _ := ctx.Value(replyHoldKey{}).(*replyHold); h != nil {
		h.release()
	}
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

func (releaseAfterReply) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (releaseAfterReply) HandleConn(context.Context, stats.ConnStats) {}

// Heavy takes one heavy-call slot for op. A call takes at most one, at its
// start: one that holds a slot must not take another (hashOpen takes one),
// or calls holding every slot could wait on each other until their queue
// timeout.
func (s *Service) Heavy(ctx context.Context, op, p string) (func(), error) {
	return s.budgets.heavy.Acquire(ctx, op, p, 1)
}

// RG takes one rg-process slot for op; whoever starts a child process
// (rg, an external command) holds one while it runs.
func (s *Service) RG(ctx context.Context, op string) (func(), error) {
	return s.budgets.rg.Acquire(ctx, op, "", 1)
}
