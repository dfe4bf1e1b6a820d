package frontend

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
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

// The per-session bound follows --max-calls when only that is set, and an
// explicit --max-session-calls above it is still refused.
func TestMaxSessionCallsFollowsMaxCalls(t *testing.T) {
	root := t.TempDir()
	cases := []struct {
		args    []string
		want    int
		wantErr string
	}{
		{[]string{"--max-calls", "4"}, 4, ""},
		{[]string{"--max-calls", "1"}, 1, ""},
		{[]string{"--max-calls", "100"}, defaultMaxSessionCalls, ""},
		{[]string{}, defaultMaxSessionCalls, ""},
		{[]string{"--max-calls", "4", "--max-session-calls", "3"}, 3, ""},
		{[]string{"--max-calls", "4", "--max-session-calls", "5"}, 0, "--max-session-calls must be between 1 and --max-calls (4)"},
	}
	for _, c := range cases {
		cfg, _, err := parseFlags(append([]string{"--root", root}, c.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.check()
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: err = %v, want %q", c.args, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", c.args, err)
		case cfg.MaxSessionCalls != c.want:
			t.Errorf("%v: --max-session-calls = %d, want %d", c.args, cfg.MaxSessionCalls, c.want)
		}
	}
}
