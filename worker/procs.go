package worker

import (
	"context"
	"runtime"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/grpc"
)

// procs runs the worker's Go code on one processor while it serves only
// small calls, and on all of them while any other call runs.
//
// A small call (a stat, a page, a 4 KiB read on the Calls stream) is a
// few µs of work between two wake-ups: its message arrives, a goroutine
// runs it, its reply leaves. With a second processor idle, every wake-up
// also wakes a thread to look for work on it, and parks it again; on one
// processor the goroutines hand off on the same thread. That was a
// quarter of the worker's CPU per fs_stat (docs/design/hop.md). Work that
// runs in parallel (the sort of a large page, a tree's stats, a hash, a
// search's reply) and any call beside which a small one must not wait
// get every processor: each RPC other than the Calls stream, a list page
// and a read of more than 64 KiB on it, and each heavy slot (a hash, a
// copy, a delete, a commit), hold them while they run.
//
// Only the worker process uses it (Main); a Service built elsewhere has
// none and leaves GOMAXPROCS alone.
type procs struct {
	mu         sync.Mutex
	busy       int // calls holding every processor
	small, all int
}

// newProcs returns the switch for this process, or nil if it has one
// processor anyway. It leaves GOMAXPROCS at small.
func newProcs() *procs {
	all := runtime.GOMAXPROCS(0)
	if all < 2 {
		return nil
	}
	runtime.GOMAXPROCS(1)
	return &procs{small: 1, all: all}
}

// hold gives the process every processor until the returned release.
func (p *procs) hold() func() {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	if p.busy++; p.busy == 1 {
		runtime.GOMAXPROCS(p.all)
	}
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			if p.busy--; p.busy == 0 {
				runtime.GOMAXPROCS(p.small)
			}
			p.mu.Unlock()
		})
	}
}

// unary holds every processor for a unary RPC, but for Stat and Read:
// a stat holds them only to hash (a heavy slot), a read only for a file
// larger than the stream carries (readVersion), so that a 4 KiB read
// asking for a large page stays a small call. The calls on the Calls
// stream do not pass here (Serve gives them their chain without it).
func (p *procs) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	switch info.FullMethod {
	case fsmcpv1.WorkerService_Stat_FullMethodName, fsmcpv1.WorkerService_Read_FullMethodName:
	default:
		defer p.hold()()
	}
	return h(ctx, req)
}

// stream holds every processor for a streaming RPC, but for the Calls
// stream itself, which lasts as long as the front-end.
func (p *procs) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if info.FullMethod != fsmcpv1.WorkerService_Calls_FullMethodName {
		defer p.hold()()
	}
	return h(srv, ss)
}
