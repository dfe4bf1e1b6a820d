package frontend

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireSession is a go-sdk server on a stdioConn over pipes, driven by a
// raw client that writes lines and reads replies.
type wireSession struct {
	t     *testing.T
	conn  *stdioConn
	in    *io.PipeWriter
	lines chan map[string]any
	outR  *io.PipeReader
	done  chan error
	// started counts tool handlers entered.
	started atomic.Int64
	// gate holds the gated tool until the test closes it.
	gate chan struct{}
}

// wireServer has the tools the framing tests need: block waits for its
// cancellation, gated for the test to close gate, big returns 64 KiB,
// progress reports progress and asks the client for its roots.
func (w *wireSession) wireServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "wire-test", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	schema := &mcp.Tool{InputSchema: map[string]any{"type": "object"}}
	add := func(name string, h mcp.ToolHandler) {
		tool := *schema
		tool.Name = name
		srv.AddTool(&tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			w.started.Add(1)
			return h(ctx, req)
		})
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	add("block", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return text("cancelled: " + ctx.Err().Error()), nil
	})
	add("gated", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-w.gate
		return text("gated done"), nil
	})
	add("slow", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		time.Sleep(200 * time.Millisecond)
		return text("slow done"), nil
	})
	add("big", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(strings.Repeat("x", 64<<10)), nil
	})
	add("progress", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "half"})
		if err != nil {
			return nil, err
		}
		roots, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, err
		}
		return text(fmt.Sprintf("roots: %d", len(roots.Roots))), nil
	})
	return srv
}

func startWire(t *testing.T, configure func(*stdioConn)) *wireSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &wireSession{t: t, in: inW, outR: outR, lines: make(chan map[string]any, 1024), done: make(chan error, 1), gate: make(chan struct{})}
	w.conn = newStdioConn(inR, outW)
	if configure != nil {
		configure(w.conn)
	}
	srv := w.wireServer()
	srv.AddReceivingMiddleware(encodeResult(w.conn))
	ss, err := srv.Connect(context.Background(), w.conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- ss.Wait() }()
	t.Cleanup(func() { inW.Close(); outR.Close(); ss.Close() })
	return w
}

// readReplies starts reading stdout; until then writes stall.
func (w *wireSession) readReplies() {
	go func() {
		r := bufio.NewReaderSize(w.outR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				m = map[string]any{"unparsable": string(line)}
			}
			w.lines <- m
		}
	}()
}

func (w *wireSession) send(line string) {
	w.t.Helper()
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wireSession) next() map[string]any {
	w.t.Helper()
	select {
	case m := <-w.lines:
		return m
	case <-time.After(10 * time.Second):
		w.t.Fatal("no reply within 10 s")
		return nil
	}
}

func (w *wireSession) initialize() {
	w.t.Helper()
	w.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := w.next(); m["id"] != "init" || m["result"] == nil {
		w.t.Fatalf("initialize: %v", m)
	}
	w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func toolText(m map[string]any) string {
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		return fmt.Sprint(m)
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

func TestWireGarbageLinesAnswered(t *testing.T) {
	w := startWire(t, nil)
	w.readReplies()
	deep := strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001)
	for _, c := range []struct {
		line string
		code float64
		id   any
	}{
		{`not json at all`, -32700, nil},
		{`{"jsonrpc":"2.0","id":1,"method":`, -32700, nil},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":2,"method":"ping","params":` + deep + `}`, -32600, 2.0},
		{`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`, -32600, nil},
		{`[]`, -32600, nil},
		{`{"jsonrpc":"1.0","id":4,"method":"ping"}`, -32600, 4.0},
		{`"a string"`, -32600, nil},
	} {
		w.send(c.line)
		m := w.next()
		if errCode(m) != c.code || m["id"] != c.id {
			t.Errorf("%.60s: got %v, want code %v id %v", c.line, m, c.code, c.id)
		}
	}
	// The session goes on.
	w.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if m := w.next(); m["id"] != 5.0 || m["result"] == nil {
		t.Fatalf("ping after garbage: %v", m)
	}
	w.initialize()
	w.send(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	if m := w.next(); m["id"] != 6.0 || m["result"] == nil {
		t.Fatalf("tools/list after garbage: %v", m)
	}
}

func TestWireLongLinesAndPartialWrites(t *testing.T) {
	w := startWire(t, func(c *stdioConn) { c.maxLine = 4096 })
	w.readReplies()
	w.send(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 200000) + `"}}`)
	if m := w.next(); errCode(m) != -32600 || !strings.Contains(fmt.Sprint(m), "more than 4096 bytes") {
		t.Fatalf("long line: %v", m)
	}
	// At the limit, a message is still a message.
	pad := 4096 - len(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"x":""}}}`)
	w.send(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"x":"` + strings.Repeat("b", pad) + `"}}}`)
	if m := w.next(); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("line at the limit: %v", m)
	}
	// A message written one byte at a time, with \r\n.
	for _, b := range []byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}` + "\r\n") {
		if _, err := w.in.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	if m := w.next(); m["id"] != 3.0 || m["result"] == nil {
		t.Fatalf("partial writes: %v", m)
	}
	// Blank lines are skipped.
	w.send("")
	w.send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if m := w.next(); m["id"] != 4.0 {
		t.Fatalf("after a blank line: %v", m)
	}
}

func TestWireDuplicateIDRefused(t *testing.T) {
	w := startWire(t, nil)
	w.readReplies()
	w.initialize()
	w.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	w.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	m := w.next()
	if m["id"] != 7.0 || errCode(m) != -32600 || !strings.Contains(fmt.Sprint(m), "already in flight") {
		t.Fatalf("duplicate id: %v", m)
	}
	// Cancelling the first, once its handler runs, answers it; then the
	// id is free again. (A call cancelled before its handler starts is
	// answered by go-sdk with a JSON-RPC error instead.)
	for w.started.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	if m := w.next(); m["id"] != 7.0 || !strings.Contains(toolText(m), "cancelled") {
		t.Fatalf("cancelled call: %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	if m := w.next(); m["id"] != 7.0 || toolText(m) != "slow done" {
		t.Fatalf("id reused: %v", m)
	}
}

func TestWireProgressAndServerRequests(t *testing.T) {
	w := startWire(t, nil)
	w.readReplies()
	w.initialize()
	w.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{},"_meta":{"progressToken":"tok"}}}`)
	m := w.next()
	p, _ := m["params"].(map[string]any)
	if m["method"] != "notifications/progress" || p["progressToken"] != "tok" || p["message"] != "half" {
		t.Fatalf("progress: %v", m)
	}
	m = w.next()
	if m["method"] != "roots/list" || m["id"] == nil {
		t.Fatalf("server request: %v", m)
	}
	id, _ := json.Marshal(m["id"])
	w.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"roots":[{"uri":"file:///a"},{"uri":"file:///b"}]}}`)
	if m := w.next(); m["id"] != 1.0 || toolText(m) != "roots: 2" {
		t.Fatalf("result after the server's request: %v", m)
	}
}

// On stdin EOF the calls in flight have the grace to answer: one that
// finishes within it answers its result, one that outlives it is answered
// unavailable, and the session ends. The first call is released only once
// the connection is draining, and both are running before EOF, whatever
// the machine's load.
func TestWireEOFDrainsCallsInFlight(t *testing.T) {
	w := startWire(t, func(c *stdioConn) { c.grace = 2 * time.Second })
	w.readReplies()
	w.initialize()
	w.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"gated","arguments":{}}}`)
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	w.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	within := func(what string, cond func() bool) {
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute", what)
			}
		}
	}
	within("both calls running", func() bool { return w.started.Load() >= 2 })
	w.in.Close()
	within("draining after EOF", func() bool {
		w.conn.mu.Lock()
		defer w.conn.mu.Unlock()
		return w.conn.stopping
	})
	close(w.gate)
	got := map[float64]map[string]any{}
	for len(got) < 3 {
		m := w.next()
		id, _ := m["id"].(float64)
		got[id] = m
	}
	if toolText(got[1]) != "gated done" {
		t.Errorf("the call finishing after EOF: %v", got[1])
	}
	if txt := toolText(got[2]); !strings.Contains(txt, `"code":"unavailable"`) || !strings.Contains(txt, "closed stdin") {
		t.Errorf("the call outliving the grace: %v", got[2])
	}
	if got[3]["result"] == nil {
		t.Errorf("tools/list: %v", got[3])
	}
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("session ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end after the drain")
	}
	select {
	case m := <-w.lines:
		t.Errorf("a second reply: %v", m)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestWireStopAnswersUnavailable(t *testing.T) {
	w := startWire(t, func(c *stdioConn) { c.grace = 100 * time.Millisecond })
	w.readReplies()
	w.initialize()
	w.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
	for w.started.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	w.conn.stop("the worker exited", w.conn.grace)
	m := w.next()
	if txt := toolText(m); m["id"] != 1.0 || !strings.Contains(txt, `"code":"unavailable"`) || !strings.Contains(txt, "the worker exited") {
		t.Fatalf("call in flight at stop: %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	if m := w.next(); m["id"] != 2.0 || !strings.Contains(toolText(m), "the server is stopping") {
		t.Fatalf("call after stop: %v", m)
	}
}

func TestWireBackpressureStopsReading(t *testing.T) {
	w := startWire(t, func(c *stdioConn) { c.maxPending = 100 << 10 })
	go func() {
		w.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i := range 50 {
			w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{}}}`, i))
		}
	}()
	time.Sleep(500 * time.Millisecond)
	// Nothing reads stdout: the init reply and a few 64 KiB replies fill
	// the pending budget, and no further call starts.
	if n := w.started.Load(); n > 4 {
		t.Fatalf("%d calls started while stdout was unread", n)
	}
	w.readReplies()
	seen := 0
	for seen < 51 {
		m := w.next()
		if m["id"] != "init" && len(toolText(m)) != 64<<10 {
			t.Fatalf("reply: %.200v", m)
		}
		seen++
	}
}

func TestWireBusyRefusal(t *testing.T) {
	w := startWire(t, func(c *stdioConn) { c.maxCalls = 3 })
	w.readReplies()
	w.initialize()
	for i := 1; i <= 3; i++ {
		w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"block","arguments":{}}}`, i))
	}
	for w.started.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	w.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	if m := w.next(); m["id"] != 4.0 || !strings.Contains(toolText(m), `"code":"unavailable"`) {
		t.Fatalf("call beyond the bound: %v", m)
	}
	w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	if m := w.next(); m["id"] != 1.0 {
		t.Fatalf("cancelled: %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	if m := w.next(); m["id"] != 5.0 || toolText(m) != "slow done" {
		t.Fatalf("call after a slot freed: %v", m)
	}
}

// The one-pass encoding says what go-sdk's own encoding says.
func TestWireEncodingMatchesSDK(t *testing.T) {
	for _, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":true,"a":"<\u0001\n\t\"\\é😀\u2028"}`}}},
		{Content: []mcp.Content{}},
		errorResult(errf(14, "outside")),
		{Meta: mcp.Meta{"k": []any{1.0, "v"}}, Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: ""}}, IsError: true},
	} {
		b, ok := encodeToolResult(res, false)
		if !ok {
			t.Fatalf("not encoded: %v", res)
		}
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("encoded\n got %s\nwant %s", b, want)
		}
	}
	for _, res := range []*mcp.CallToolResult{
		{StructuredContent: map[string]any{"a": 1}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "\xff"}}},
	} {
		if _, ok := encodeToolResult(res, false); ok {
			t.Errorf("encoded a result left to go-sdk: %v", res)
		}
	}
	b, _ := encodeToolResult(&mcp.CallToolResult{Content: []mcp.Content{}}, true)
	if !strings.Contains(string(b), `"resultType":"complete"`) {
		t.Errorf("complete: %s", b)
	}
}

// decodeMessage agrees with go-sdk's jsonrpc.DecodeMessage.
func TestWireDecodeMatchesSDK(t *testing.T) {
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"a\"b\\c"}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":""}`,
		`{"jsonrpc":"2.0","id":3,"result":{"roots":[]}}`,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no","data":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":5.0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":6,"method":7}`,
		`{"jsonrpc":"1.0","id":7,"method":"ping"}`,
		`{"id":8,"method":"ping"}`,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","ID":9,"Method":"ping"}`,
		`{"jsonrpc":"2.0","id":10,"method":"ping","params":` + deep + `}`,
		`[]`, `"x"`, `{`, `nul`,
	} {
		got, gerr := decodeMessage([]byte(line))
		want, werr := jsonrpc.DecodeMessage([]byte(line))
		if (gerr != nil) != (werr != nil) {
			t.Errorf("%.80s: decodeMessage error %v, go-sdk %v", line, gerr, werr)
			continue
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%.80s:\n got %#v\nwant %#v", line, got, want)
		}
	}
}

// Small replies nobody reads stop reading too, once maxPendingWrites of
// them wait: each holds a goroutine.
func TestWireBackpressureCountsReplies(t *testing.T) {
	w := startWire(t, nil)
	go func() {
		w.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i := range 300 {
			w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{}}}`, i))
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	if n := w.started.Load(); n > maxPendingWrites+8 {
		t.Fatalf("%d calls started while stdout was unread", n)
	}
	w.readReplies()
	for range 301 {
		w.next()
	}
}

// TestWireLargeResultsWholeLines: a result written in place, in parts
// (copyResultBelow), is never split by another reply written meanwhile.
func TestWireLargeResultsWholeLines(t *testing.T) {
	w := startWire(t, nil)
	w.readReplies()
	w.initialize()
	for i := range 40 {
		if i%2 == 0 {
			w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{}}}`, i))
		} else {
			w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
		}
	}
	for range 40 {
		m := w.next()
		if m["unparsable"] != nil {
			t.Fatalf("a reply line is not one JSON message: %.200s", m["unparsable"])
		}
		id, _ := m["id"].(float64)
		if int(id)%2 == 0 && len(toolText(m)) != 64<<10 {
			t.Fatalf("reply %v: %d bytes of text, want %d", id, len(toolText(m)), 64<<10)
		}
	}
}
