package frontend

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionCap bounds the HTTP sessions the front-end keeps. A client that
// goes away without DELETE leaves its session behind until the idle
// timeout; sessionCap makes room for a new session by closing the one
// idle the longest, and refuses the new one only when every session has
// a call in flight. It does not limit how fast sessions are opened.
type sessionCap struct {
	max int
	mu  sync.Mutex
	// sessions by ID: when each was last used and its calls in flight.
	sessions map[string]*sessionUse
}

type sessionUse struct {
	ss       *mcp.ServerSession
	last     time.Time
	inFlight int
}

func newSessionCap(max int) *sessionCap {
	return &sessionCap{max: max, sessions: map[string]*sessionUse{}}
}

// middleware counts every message of a session as a use of it, and makes
// room when a new session arrives.
func (c *sessionCap) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok || ss.ID() == "" {
			return next(ctx, method, req)
		}
		if err := c.begin(ss); err != nil {
			return nil, err
		}
		defer c.end(ss.ID())
		return next(ctx, method, req)
	}
}

// begin records a use of ss. A session not seen before that would exceed
// the cap first closes the session idle the longest.
func (c *sessionCap) begin(ss *mcp.ServerSession) error {
	id := ss.ID()
	c.mu.Lock()
	u, known := c.sessions[id]
	if known {
		u.inFlight++
		u.last = time.Now()
		c.mu.Unlock()
		return nil
	}
	var evict *mcp.ServerSession
	if len(c.sessions) >= c.max {
		var oldest *sessionUse
		for _, o := range c.sessions {
			if o.inFlight == 0 && (oldest == nil || o.last.Before(oldest.last)) {
				oldest = o
			}
		}
		if oldest == nil {
			c.mu.Unlock()
			return &jsonrpc.Error{Code: codeServerBusy, Message: "fsmcp: every session has a call in flight and --http-max-sessions is reached; try again later"}
		}
		delete(c.sessions, oldest.ss.ID())
		evict = oldest.ss
	}
	c.sessions[id] = &sessionUse{ss: ss, last: time.Now(), inFlight: 1}
	c.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	// A session that ends by itself (DELETE, idle timeout, a closed
	// stream) leaves the count.
	go func() {
		ss.Wait()
		c.mu.Lock()
		if u := c.sessions[id]; u != nil && u.ss == ss {
			delete(c.sessions, id)
		}
		c.mu.Unlock()
	}()
	return nil
}

func (c *sessionCap) end(id string) {
	c.mu.Lock()
	if u := c.sessions[id]; u != nil {
		u.inFlight--
		u.last = time.Now()
	}
	c.mu.Unlock()
}
