package frontend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The audit log: one JSON line per tool call, written after the call
// answers. It records who (session, HTTP peer), what (tool, the path
// arguments as given), and how it went (outcome code, duration, reply
// size, scope_violation). It never records file contents: neither the
// reply's nor a write's, only their sizes. It does not record calls that
// never reach a tool (unknown tools, malformed JSON-RPC), and it is not
// tamper-proof: ship it off the host if that matters.

// maxAuditPath bounds one path in a line; a longer one is clipped and the
// line says so.
const maxAuditPath = 4096

// pathArgs are the arguments that name paths, each with its _base64 twin.
var pathArgs = []string{"path", "from", "to"}

// auditLog writes whole lines; concurrent calls never interleave.
type auditLog struct {
	mu     sync.Mutex
	w      io.Writer
	f      *os.File // --audit-log, else nil (stderr)
	stderr io.Writer
	failed bool
	// inFlight counts calls running, so that stopping can let them
	// answer first.
	inFlight sync.WaitGroup
}

// openAudit appends to path, or writes to stderr when path is empty. It
// runs before the front-end confines itself: afterwards no file can be
// opened.
func openAudit(path string, stderr io.Writer) (*auditLog, error) {
	a := &auditLog{w: stderr, stderr: stderr}
	if path == "" {
		return a, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit-log: %w", err)
	}
	a.w, a.f = f, f
	return a, nil
}

func (a *auditLog) close() {
	if a != nil && a.f != nil {
		a.f.Close()
	}
}

// wrap records every call of h, whose tool is named tool, and counts it
// while it runs.
func (a *auditLog) wrap(tool string, h mcp.ToolHandler) mcp.ToolHandler {
	if a == nil {
		return h
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a.inFlight.Add(1)
		defer a.inFlight.Done()
		start := time.Now()
		ctx, note := withNote(ctx)
		res, err := h(ctx, req)
		a.write(auditLine(start, time.Since(start), tool, req, res, err, note))
		return res, err
	}
}

func (a *auditLog) write(line []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.w.Write(line); err != nil && !a.failed {
		a.failed = true
		fmt.Fprintf(a.stderr, "fsmcp: audit log: %v (further failures are not reported)\n", err)
	}
}

// auditLine renders one call as a JSON line.
func auditLine(start time.Time, d time.Duration, tool string, req *mcp.CallToolRequest, res *mcp.CallToolResult, err error, note *callNote) []byte {
	o := newObj().str("time", formatTime(start.UnixNano())).str("event", "tool_call")
	session, peer := "", ""
	if req != nil && req.Session != nil {
		session = req.Session.ID()
	}
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		peer = req.Extra.Header.Get(peerHeader)
	}
	if session == "" && peer == "" {
		session = "stdio" // one client per process
	}
	o.str("session", session)
	if peer != "" {
		o.str("peer", peer)
	}
	o.str("tool", tool)
	if req != nil && req.Params != nil {
		if paths, clipped := auditPaths(req.Params.Arguments); paths != nil {
			o.object("paths", paths)
			if clipped {
				o.bool("paths_clipped", true)
			}
		}
	}
	outcome, bytes, scope := "ok", int64(0), false
	switch {
	case err != nil:
		outcome = "protocol_error"
	case res != nil:
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				bytes += int64(len(tc.Text))
			}
		}
		if res.IsError {
			outcome = errorCode(res)
		}
		if res.InputRequests != nil {
			outcome = "input_required"
		}
		scope, _ = res.Meta["scope_violation"].(bool)
	}
	o.str("outcome", outcome).int("duration_us", d.Microseconds()).int("reply_bytes", bytes).bool("scope_violation", scope)
	if note != nil && note.decision != "" {
		o.str("decision", note.decision)
	}
	if note != nil && note.undo != "" {
		o.str("undo", note.undo)
	}
	return append(o.bytes(), '\n')
}

// errorCode reads the code of an error reply's document.
func errorCode(res *mcp.CallToolResult) string {
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			var doc struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(tc.Text), &doc) == nil && doc.Error.Code != "" && len(doc.Error.Code) < 64 {
				return doc.Error.Code
			}
		}
	}
	return "error"
}

// auditPaths picks the path arguments out of a call's raw arguments, as
// the worker would resolve them (one leading "/" stripped), as text when
// UTF-8, else under key_base64. It returns nil when there are none.
func auditPaths(raw json.RawMessage) (paths *obj, clipped bool) {
	var args map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &args) != nil {
		return nil, false
	}
	o := newObj()
	for _, k := range pathArgs {
		var p []byte
		var s string
		if v, ok := args[k]; ok && json.Unmarshal(v, &s) == nil {
			p = []byte(s)
		} else if v, ok := args[k+"_base64"]; ok && json.Unmarshal(v, &s) == nil {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				continue // refused by the tool as invalid_argument
			}
			p = b
		} else {
			continue
		}
		p = displayPath(p)
		if len(p) > maxAuditPath {
			text := utf8.Valid(p)
			p, clipped = p[:maxAuditPath], true
			if text {
				p = trimPartialRune(p) // stays text, not base64
			}
		}
		o.name(k, p)
	}
	if o.n == 0 {
		return nil, false
	}
	return o, clipped
}
