package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The audit log: one JSON line per tool call, written after the call
// answers. It records who (session, HTTP peer), what (tool, the path
// arguments as given), and how it went (outcome code, duration, reply
// size, scope_violation, and policy_violation when the policy refused
// it). It never records file contents: neither the
// reply's nor a write's, only their sizes. It does not record calls that
// never reach a tool (unknown tools, malformed JSON-RPC), and it is not
// tamper-proof: ship it off the host if that matters.

// maxAuditPath bounds one path in a line; a longer one is clipped and the
// line says so.
const maxAuditPath = 4096

// maxAuditListPaths bounds the paths one argument names in a line
// (fs_read_many takes 64; a patch may touch many more files); past it
// the line says paths_clipped.
const maxAuditListPaths = 1024

// auditQueue is how many lines may wait for the log's writer. A log that
// cannot keep up (a stderr nobody drains, a stalled disk) never delays a
// reply: past the queue, lines are dropped and counted, and a line
// {"event":"audit_dropped","count":N} records the loss once the log moves
// again, and at exit.
const auditQueue = 4096

// auditLog writes whole lines from one goroutine; calls only queue them.
type auditLog struct {
	w      io.Writer
	f      *os.File // --audit-log, else nil (stderr)
	stderr io.Writer
	lines  chan []byte
	done   chan struct{}
	// dropped counts lines lost since the last audit_dropped line.
	dropped   atomic.Int64
	closeOnce sync.Once
}

// openAudit appends to path, or writes to stderr when path is empty. It
// runs before the front-end confines itself: afterwards no file can be
// opened.
func openAudit(path string, stderr io.Writer) (*auditLog, error) {
	a := &auditLog{w: stderr, stderr: stderr, lines: make(chan []byte, auditQueue), done: make(chan struct{})}
	if path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--audit-log: %w", err)
		}
		a.w, a.f = f, f
	}
	go a.run()
	return a, nil
}

// auditCloseWait bounds how long closing waits for queued lines to reach
// a log that is not moving.
const auditCloseWait = 2 * time.Second

// close writes what is queued (for up to auditCloseWait) and closes the
// file.
func (a *auditLog) close() {
	if a == nil {
		return
	}
	a.closeOnce.Do(func() {
		close(a.lines)
		select {
		case <-a.done:
		case <-time.After(auditCloseWait):
			return // the writer is stuck; the file closes with the process
		}
		if a.f != nil {
			a.f.Close()
		}
	})
}

func (a *auditLog) run() {
	defer close(a.done)
	failed := false
	write := func(line []byte) {
		if _, err := a.w.Write(line); err != nil && !failed {
			failed = true
			fmt.Fprintf(a.stderr, "fsmcp: audit log: %v (further failures are not reported)\n", err)
		}
	}
	for line := range a.lines {
		write(line)
		if len(a.lines) == 0 {
			if n := a.dropped.Swap(0); n > 0 {
				write(droppedLine(n))
			}
		}
	}
	if n := a.dropped.Swap(0); n > 0 {
		write(droppedLine(n))
	}
}

func droppedLine(n int64) []byte {
	o := newObj().str("time", formatTime(time.Now().UnixNano())).str("event", "audit_dropped").int("count", n)
	return append(o.bytes(), '\n')
}

// record queues one line, or counts it dropped when the queue is full.
func (a *auditLog) record(line []byte) {
	select {
	case a.lines <- line:
	default:
		a.dropped.Add(1)
	}
}

// callRecord is what the tool handler learnt of a call, for its audit
// line: the arguments it decoded and the outcome it produced, so the line
// reads neither again.
type callRecord struct {
	args       map[string]any
	outcome    string
	replyBytes int64
	// res is the result the outcome describes; a wrapper that answers
	// otherwise leaves the line to read its own result.
	res *mcp.CallToolResult
}

type recordKey struct{}

// recordOf returns the call's record, or nil outside an audited call.
func recordOf(ctx context.Context) *callRecord {
	r, _ := ctx.Value(recordKey{}).(*callRecord)
	return r
}

// wrap records every call of h, a handler of t.
func (a *auditLog) wrap(t *tool, h mcp.ToolHandler) mcp.ToolHandler {
	if a == nil {
		return h
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		rec := &callRecord{}
		start := time.Now()
		ctx, note := withNote(context.WithValue(ctx, recordKey{}, rec))
		res, err := h(ctx, req)
		a.record(auditLine(start, time.Since(start), t, req, rec, res, err, note))
		return res, err
	}
}

// auditLine renders one call as a JSON line.
func auditLine(start time.Time, d time.Duration, t *tool, req *mcp.CallToolRequest, rec *callRecord, res *mcp.CallToolResult, err error, note *callNote) []byte {
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
	tool := t.name
	o.str("tool", tool)
	args := rec.args
	if args == nil && req != nil && req.Params != nil && len(req.Params.Arguments) > 0 {
		// The tool did not decode them (it refused them first).
		json.Unmarshal(req.Params.Arguments, &args)
	}
	if args != nil {
		if paths, clipped := auditPaths(t, args); paths != nil {
			o.object("paths", paths)
			if clipped {
				o.bool("paths_clipped", true)
			}
		}
		if tool == execToolName {
			if argv, clipped := auditArgv(req.Params.Arguments); argv != nil {
				o.rawValue("argv", argv)
				if clipped {
					o.bool("argv_clipped", true)
				}
			}
		}
	}
	outcome, bytes, scope := "ok", int64(0), false
	switch {
	case err != nil:
		outcome = "protocol_error"
	case rec.outcome != "" && res == rec.res:
		outcome, bytes = rec.outcome, rec.replyBytes
		if res != nil {
			scope, _ = res.Meta["scope_violation"].(bool)
		}
	case res != nil:
		for _, c := range res.Content {
			switch tc := c.(type) {
			case *mcp.TextContent:
				bytes += int64(len(tc.Text))
			case *splicedText:
				bytes += int64(tc.size)
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
	if tool == execToolName {
		// Only a command's reply says how it ended; decoding every
		// tool's reply to find out cost a 1 MiB read half the
		// front-end's CPU.
		auditExit(o, res)
	}
	o.str("outcome", outcome).int("duration_us", d.Microseconds()).int("reply_bytes", bytes).bool("scope_violation", scope)
	if res != nil && err == nil {
		if policy, _ := res.Meta["policy_violation"].(bool); policy {
			o.bool("policy_violation", true)
		}
	}
	if note != nil && note.decision != "" {
		o.str("decision", note.decision)
	}
	if note != nil && note.undo != "" {
		o.str("undo", note.undo)
	}
	if note != nil && note.undone != "" {
		o.str("undone", note.undone)
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

// auditPaths renders every path the call's decoded arguments name, as
// its declaration (tool.paths) says, as the worker would resolve them (one
// leading "/" stripped): a single path under its argument's name (as text
// when UTF-8, else under name_base64), the paths of a list or of a
// path-keyed object as an array of texts or {"path_base64": ...}. It
// returns nil when there are none.
func auditPaths(t *tool, args map[string]any) (paths *obj, clipped bool) {
	named := t.callPaths(args)
	if len(named) == 0 {
		return nil, false
	}
	clip := func(p []byte) []byte {
		p = displayPath(p)
		if len(p) > maxAuditPath {
			text := utf8.Valid(p)
			p, clipped = p[:maxAuditPath], true
			if text {
				p = trimPartialRune(p) // stays text, not base64
			}
		}
		return p
	}
	o := newObj()
	for i := 0; i < len(named); {
		a := named[i].arg
		if a.kind == kindOne {
			o.name(a.label, clip(named[i].path))
			i++
			continue
		}
		o.key(a.label)
		o.b = append(o.b, '[')
		n := 0
		for ; i < len(named) && named[i].arg.label == a.label; i++ {
			if n == maxAuditListPaths {
				clipped = true
				continue
			}
			if n > 0 {
				o.b = append(o.b, ',')
			}
			o.b = appendPathItem(o.b, clip(named[i].path))
			n++
		}
		o.b = append(o.b, ']')
	}
	return o, clipped
}

// appendPathItem appends p as a JSON string when it is UTF-8, else as
// {"path_base64": ...}, the form fs_read_many takes.
func appendPathItem(b, p []byte) []byte {
	if utf8.Valid(p) {
		return jsontext.AppendString(b, p)
	}
	b = append(b, '{')
	b = jsontext.AppendName(b, "path", p)
	return append(b, '}')
}
