package frontend

import (
	"context"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCallGateBounds(t *testing.T) {
	g := newCallGate(3, 2, 50*time.Millisecond)
	ctx := context.Background()
	a, b := new(mcp.ServerSession), new(mcp.ServerSession)
	r1, te := g.acquire(ctx, a)
	r2, te2 := g.acquire(ctx, a)
	if te != nil || te2 != nil {
		t.Fatal(te, te2)
	}
	// a's third call waits for a's slots, then is refused.
	begin := time.Now()
	if _, te := g.acquire(ctx, a); te == nil || te.code != fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE || time.Since(begin) < 50*time.Millisecond {
		t.Fatalf("third call of a session: %v after %v", te, time.Since(begin))
	}
	// b is not held up by a's backlog; its second call meets the server's bound.
	r3, te := g.acquire(ctx, b)
	if te != nil {
		t.Fatal(te)
	}
	if _, te := g.acquire(ctx, b); te == nil || te.code != fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE {
		t.Fatalf("call beyond the server's bound: %v", te)
	}
	// A call waiting for a slot gets it when one frees.
	freed := make(chan struct{})
	go func() { time.Sleep(10 * time.Millisecond); r1(); close(freed) }()
	r4, te := g.acquire(ctx, b)
	if te != nil {
		t.Fatalf("call after a slot freed: %v", te)
	}
	// A call cancelled while it waits leaves at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, te := g.acquire(cctx, b); te == nil || te.code != fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED {
		t.Fatalf("cancelled wait: %v", te)
	}
	<-freed
	r2()
	r3()
	r4()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.server) != 0 || len(g.sessions) != 0 {
		t.Fatalf("slots left: server %d, sessions %d", len(g.server), len(g.sessions))
	}
}

func TestCallGateFitsWorkerStreams(t *testing.T) {
	if maxCallsLimit > worker.MaxStreams {
		t.Fatalf("--max-calls may reach %d, the worker serves %d streams", maxCallsLimit, worker.MaxStreams)
	}
}
