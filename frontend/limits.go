package frontend

import (
	"context"
	"sync"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callGate bounds the tool calls running at once, per session and for the
// whole server, on both transports: each running call may hold a page
// (--max-response-bytes) several times over, here and in the worker, so
// the bound on calls is the bound on memory. A call beyond either bound
// waits up to the gate's wait for a slot, then is answered unavailable
// with the reason; a call cancelled while it waits leaves at once.
type callGate struct {
	server     chan struct{}
	perSession int
	wait       time.Duration

	mu       sync.Mutex
	sessions map[mcp.Session]*sessionSlots
}

type sessionSlots struct {
	slots chan struct{}
	refs  int
}

func newCallGate(perServer, perSession int, wait time.Duration) *callGate {
	return &callGate{
		server:     make(chan struct{}, perServer),
		perSession: perSession,
		wait:       wait,
		sessions:   make(map[mcp.Session]*sessionSlots),
	}
}

// middleware admits tools/call through the gate; other methods pass.
func (g *callGate) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		release, te := g.acquire(ctx, req.GetSession())
		if te != nil {
			return errorResult(te), nil
		}
		defer release()
		return next(ctx, method, req)
	}
}

// acquire takes a session slot, then a server slot. Taking the session's
// first means one session's backlog waits on its own slots, not in the
// server's queue ahead of other sessions.
func (g *callGate) acquire(ctx context.Context, s mcp.Session) (release func(), te *toolError) {
	g.mu.Lock()
	ss := g.sessions[s]
	if ss == nil {
		ss = &sessionSlots{slots: make(chan struct{}, g.perSession)}
		g.sessions[s] = ss
	}
	ss.refs++
	g.mu.Unlock()
	unref := func() {
		g.mu.Lock()
		if ss.refs--; ss.refs == 0 {
			delete(g.sessions, s)
		}
		g.mu.Unlock()
	}
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case ss.slots <- struct{}{}:
	default:
		select {
		case ss.slots <- struct{}{}:
		case <-timer.C:
			unref()
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE,
				"%d calls of this session are running (--max-session-calls) and none finished within %s; retry later", g.perSession, g.wait)
		case <-ctx.Done():
			unref()
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED, "cancelled while waiting for a call slot")
		}
	}
	select {
	case g.server <- struct{}{}:
	default:
		select {
		case g.server <- struct{}{}:
		case <-timer.C:
			<-ss.slots
			unref()
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE,
				"%d calls are running on this server (--max-calls) and none finished within %s; retry later", cap(g.server), g.wait)
		case <-ctx.Done():
			<-ss.slots
			unref()
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED, "cancelled while waiting for a call slot")
		}
	}
	return func() {
		<-g.server
		<-ss.slots
		unref()
	}, nil
}
