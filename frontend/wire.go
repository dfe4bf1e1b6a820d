package frontend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// The wire: the front-end's own stdio mcp.Connection and the encoding of
// tool results in one pass. go-sdk's IOTransport decodes every message
// through a json.Decoder with a fresh 32 KiB buffer, several times, ends
// the session on the first line that is not JSON, cancels calls in flight
// on stdin EOF without writing their replies, and re-validates an encoded
// result at each of its three marshalling levels. This connection, built
// only on go-sdk's public Transport and Connection interfaces and its
// jsonrpc message types, frames stdio itself:
//
//   - One line is one message, read with a bound (maxStdioLineBytes) that
//     is enforced while reading: a longer line is discarded unbuffered and
//     answered with -32600. The envelope is decoded once, in place
//     (decodeMessage).
//   - A line that is not JSON is answered -32700, one that is JSON but no
//     JSON-RPC message -32600 (with its id when one can be read), a batch
//     -32600 (MCP 2025-06-18 removed batches): the session goes on.
//   - A call whose id is already in flight is refused with -32600; go-sdk's
//     jsonrpc2 would drop it without a reply.
//   - Every call read is tracked until its reply is written. On stdin EOF,
//     or when the front-end stops, the calls in flight have stopGrace to
//     answer; whatever is still unanswered then is answered here
//     (unavailable) before the session ends. No call read goes unanswered.
//   - Backpressure: while more than maxPendingWriteBytes of replies (or
//     more than maxPendingWrites replies) wait for stdout, no further
//     message is read, so a client that stops reading stops new work
//     instead of growing the heap.
//   - A tool result arrives already encoded (encodeResult): go-sdk only
//     sees a small token, and Write puts the encoded bytes on the wire.
//
// Everything go-sdk sends passes through unchanged: notifications
// (progress, logging), server-to-client requests (elicitation) and the
// client's responses to them, and notifications/cancelled, which go-sdk
// handles above this layer.

const (
	// maxStdioLineBytes bounds one JSON-RPC message on stdio.
	maxStdioLineBytes = link.MaxMessageBytes
	// maxPendingWriteBytes of replies waiting for stdout, or more than
	// maxPendingWrites replies, stop reading: a reply waits only when
	// stdout is not read, and each waiting one holds a goroutine.
	maxPendingWriteBytes = 8 << 20
	maxPendingWrites     = 64
	// maxUnansweredCalls read but not yet answered; beyond it a call is
	// refused at once. The calls waiting for a slot (callGate) are among
	// them, each with a goroutine (tens of KiB once go-sdk's handler has
	// grown its stack), so this bounds what a client can park in the
	// front-end.
	maxUnansweredCalls = 256
	// maxUnansweredBytes of call messages read but not yet answered.
	maxUnansweredBytes = 256 << 20
	// readChunk is the size of stdin reads.
	readChunk = 64 << 10
)

// JSON-RPC error codes this layer answers with.
const (
	codeServerBusy     = -32000
	codeServerStopping = -32001
)

// stdioConn is the stdio mcp.Transport and its one mcp.Connection.
type stdioConn struct {
	in  io.Reader
	out io.Writer
	// The bounds, from the constants above (tests shrink them).
	maxLine      int
	maxPending   int
	maxCalls     int
	maxCallBytes int
	grace        time.Duration
	// maxArgs bounds the arguments of each tool by name (filled before
	// Connect): larger ones are refused here, before go-sdk copies and
	// decodes them.
	maxArgs map[string]int
	// structured: the refusals written here carry structuredContent
	// (--structured-content).
	structured bool

	// msgs hands messages from the reading goroutine to Read.
	msgs chan jsonrpc.Message
	// ended is closed when reading ends for good (stdin EOF after the
	// drain, or stop): Read then returns io.EOF.
	ended     chan struct{}
	endOnce   sync.Once
	closed    chan struct{}
	closeOnce sync.Once

	wmu sync.Mutex // serialises writes to out

	mu   sync.Mutex
	cond *sync.Cond // signalled when pending or calls change
	// calls are the calls read and not yet answered.
	calls map[jsonrpc.ID]pendingCall
	// answered are calls this layer answered itself (at stop): go-sdk's
	// late reply to one of them is dropped.
	answered      map[jsonrpc.ID]bool
	callBytes     int
	pending       int // bytes handed to Write and not yet written
	writers       int // writes handed to Write and not yet written
	stopping      bool
	stoppingCause string

	// encoded holds results encoded by encodeResult, keyed by the number
	// in their token, until Write puts them on the wire.
	encoded sync.Map
	seq     atomic.Uint64

	// readErr is what ended reading (io.EOF for a closed stdin).
	readErr error
}

type pendingCall struct {
	method string
	size   int
}

func newStdioConn(in io.Reader, out io.Writer) *stdioConn {
	c := &stdioConn{
		in: in, out: out, maxLine: maxStdioLineBytes, maxPending: maxPendingWriteBytes,
		maxCalls: maxUnansweredCalls, maxCallBytes: maxUnansweredBytes, grace: stopGrace,
		msgs:     make(chan jsonrpc.Message),
		ended:    make(chan struct{}),
		closed:   make(chan struct{}),
		calls:    make(map[jsonrpc.ID]pendingCall),
		answered: make(map[jsonrpc.ID]bool),
		maxArgs:  make(map[string]int),
	}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Connect implements mcp.Transport; it starts reading stdin.
func (c *stdioConn) Connect(context.Context) (mcp.Connection, error) {
	go c.readLoop()
	return c, nil
}

// SessionID implements mcp.Connection: stdio has one session.
func (c *stdioConn) SessionID() string { return "" }

// Read implements mcp.Connection.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.msgs:
		return m, nil
	case <-c.ended:
		return nil, c.readErr
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close implements mcp.Connection. Stdout stays open: the process owns it.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
	return nil
}

// readLoop reads stdin line by line until EOF, then drains.
func (c *stdioConn) readLoop() {
	r := bufio.NewReaderSize(c.in, readChunk)
	var err error
	for {
		if !c.waitWritable() {
			return
		}
		var line []byte
		line, err = c.readLine(r)
		if err != nil {
			break
		}
		if line != nil {
			c.handleLine(line)
		}
	}
	if !errors.Is(err, io.EOF) {
		err = fmt.Errorf("reading stdin: %w", err)
	} else {
		err = io.EOF
	}
	c.stop("the client closed stdin", c.grace)
	c.end(err)
}

// waitWritable blocks while too many reply bytes wait for stdout. It
// returns false once the connection is closed.
func (c *stdioConn) waitWritable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending > c.maxPending || c.writers > maxPendingWrites {
		select {
		case <-c.closed:
			return false
		default:
		}
		c.cond.Wait()
	}
	return true
}

// errLineTooLong reports a line over maxLine; the line was discarded.
type errLineTooLong struct{ n int }

func (e errLineTooLong) Error() string { return fmt.Sprintf("more than %d bytes", e.n) }

// readLine returns the next line without its end, nil for a line that
// was too long (and already answered) or blank. It never holds more than
// maxLine bytes of one line.
func (c *stdioConn) readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > c.maxLine+2 {
			// Discard the rest of the line without keeping it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			c.writeError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message of more than %d bytes refused", c.maxLine))
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return nil, err
			}
			return nil, nil
		}
		if line == nil && err == nil {
			// The common case: the whole line was in the buffer.
			line = make([]byte, len(chunk))
			copy(line, chunk)
		} else {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(bytes.TrimSpace(line)) > 0 && errors.Is(err, io.EOF) {
				// A last message without its newline is still a message.
				c.handleLine(bytes.TrimSpace(line))
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			return nil, nil
		}
		return line, nil
	}
}

// handleLine decodes one message and delivers it, or answers it here.
func (c *stdioConn) handleLine(line []byte) {
	msg, err := decodeMessage(line)
	if err != nil {
		c.refuseUndecodable(line, err)
		return
	}
	req, isReq := msg.(*jsonrpc.Request)
	if !isReq || !req.IsCall() {
		c.deliver(msg)
		return
	}
	if te := c.checkArgumentSize(req); te != nil {
		c.writeToolError(req.ID, te)
		return
	}
	c.mu.Lock()
	var refuse string
	code := int64(jsonrpc.CodeInvalidRequest)
	switch _, dup := c.calls[req.ID]; {
	case dup:
		refuse = fmt.Sprintf("request id %s is already in flight", idText(req.ID))
	case c.stopping:
		refuse, code = "the server is stopping: "+c.stoppingCause, codeServerStopping
	case len(c.calls) >= c.maxCalls || c.callBytes+len(line) > c.maxCallBytes:
		refuse, code = fmt.Sprintf("%d calls (%d bytes) are waiting for an answer on this session; retry when some have answered", len(c.calls), c.callBytes), codeServerBusy
	default:
		c.calls[req.ID] = pendingCall{method: req.Method, size: len(line)}
		c.callBytes += len(line)
		delete(c.answered, req.ID)
	}
	c.mu.Unlock()
	if refuse != "" {
		if req.Method == "tools/call" && code != jsonrpc.CodeInvalidRequest {
			c.writeToolError(req.ID, errf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "%s", refuse))
			return
		}
		c.writeError(&req.ID, code, refuse)
		return
	}
	c.deliver(msg)
}

// envelope is a JSON-RPC message as it arrives.
type envelope struct {
	Version string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeMessage is jsonrpc.DecodeMessage in one pass over the line, which
// stays the messages' backing store: go-sdk's decodes through a
// json.Decoder that allocates a 32 KiB buffer, twice per message (the
// envelope, then the method). The decoder is the one go-sdk uses
// (segmentio/encoding), with the same case-sensitive field matching.
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	if depth := jsonDepth(line); depth > maxJSONDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxJSONDepth)
	}
	var e envelope
	if _, err := segjson.Parse(line, &e, segjson.DontMatchCaseInsensitiveStructFields|segjson.ZeroCopy); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if e.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected \"2.0\"", e.Version)
	}
	id, err := jsonrpc.MakeID(e.ID)
	if err != nil {
		return nil, err
	}
	if e.Method != nil {
		return &jsonrpc.Request{ID: id, Method: *e.Method, Params: e.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("invalid request: neither a method nor an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: e.Result}
	if e.Error != nil {
		resp.Error = e.Error
	}
	return resp, nil
}

// maxJSONDepth is go-sdk's bound on the nesting of a message.
const maxJSONDepth = 1000

// jsonDepth is the deepest nesting of objects and arrays in b, outside
// strings.
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// checkArgumentSize refuses a tools/call whose arguments exceed what its
// tool accepts, reading only the name and the arguments' extent (in
// place, no copy): a 100 MB fs_stat costs its line and nothing more.
func (c *stdioConn) checkArgumentSize(req *jsonrpc.Request) *toolError {
	if req.Method != "tools/call" || len(req.Params) <= maxSmallArguments {
		return nil
	}
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if _, err := segjson.Parse(req.Params, &p, segjson.DontMatchCaseInsensitiveStructFields|segjson.ZeroCopy); err != nil {
		return nil // go-sdk answers it
	}
	if limit, ok := c.maxArgs[p.Name]; ok && len(p.Arguments) > limit {
		return argumentsTooLarge(len(p.Arguments), limit)
	}
	return nil
}

// deliver hands msg to Read, unless reading has ended.
func (c *stdioConn) deliver(msg jsonrpc.Message) {
	select {
	case c.msgs <- msg:
	case <-c.ended:
	case <-c.closed:
	}
}

// refuseUndecodable answers a line DecodeMessage refused.
func (c *stdioConn) refuseUndecodable(line []byte, err error) {
	if !json.Valid(line) {
		c.writeError(nil, jsonrpc.CodeParseError, "parse error: the line is not one JSON value")
		return
	}
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '[' {
		c.writeError(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send one message per line")
		return
	}
	// Answer with the id when it is one JSON-RPC allows.
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	var id *jsonrpc.ID
	if json.Unmarshal(line, &probe) == nil && len(probe.ID) > 0 {
		var v any
		if json.Unmarshal(probe.ID, &v) == nil {
			if f, ok := v.(float64); ok && f != float64(int64(f)) {
				v = nil // a fractional id has no jsonrpc.ID
			}
			if mid, err := jsonrpc.MakeID(v); err == nil && mid.IsValid() {
				id = &mid
			}
		}
	}
	c.writeError(id, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
}

// stop refuses new calls and gives the calls in flight up to grace to
// answer; whatever is still unanswered is then answered unavailable, so
// that every call read gets exactly one reply.
func (c *stdioConn) stop(cause string, grace time.Duration) {
	c.mu.Lock()
	if !c.stopping {
		c.stopping, c.stoppingCause = true, cause
	}
	deadline := time.Now().Add(grace)
	timer := time.AfterFunc(grace, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	for len(c.calls) > 0 && time.Now().Before(deadline) {
		select {
		case <-c.closed:
			c.mu.Unlock()
			return
		default:
		}
		c.cond.Wait()
	}
	left := make(map[jsonrpc.ID]pendingCall, len(c.calls))
	for id, pc := range c.calls {
		left[id] = pc
		c.answered[id] = true
		delete(c.calls, id)
	}
	c.callBytes = 0
	cause = c.stoppingCause
	c.mu.Unlock()
	for id, pc := range left {
		if pc.method == "tools/call" {
			c.writeToolError(id, errf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "the server is stopping (%s) and the call did not finish within %s", cause, grace))
		} else {
			c.writeError(&id, codeServerStopping, "the server is stopping: "+cause)
		}
	}
}

// end makes Read return err from now on.
func (c *stdioConn) end(err error) {
	c.endOnce.Do(func() {
		c.readErr = err
		close(c.ended)
	})
}

// Write implements mcp.Connection.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	resp, isResp := msg.(*jsonrpc.Response)
	if !isResp {
		data, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return err
		}
		return c.writeLine(append(data, '\n'))
	}
	// The call stops counting before its reply is written: a client may
	// reuse the id as soon as it has read the reply.
	c.mu.Lock()
	late := c.answered[resp.ID]
	if late {
		delete(c.answered, resp.ID)
	}
	if pc, ok := c.calls[resp.ID]; ok {
		delete(c.calls, resp.ID)
		c.callBytes -= pc.size
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	result := resp.Result
	if n, ok := tokenNumber(result); ok {
		v, found := c.encoded.LoadAndDelete(n)
		if !found {
			return fmt.Errorf("BUG(fsmcp): result token %d has no encoding", n)
		}
		result = v.([]byte)
	}
	if late {
		return nil // answered at stop; the client has its reply
	}
	var data []byte
	if resp.Error != nil {
		var err error
		if data, err = jsonrpc.EncodeMessage(resp); err != nil {
			return err
		}
		data = append(data, '\n')
	} else {
		data = make([]byte, 0, 64)
		data = append(data, `{"jsonrpc":"2.0","id":`...)
		data = appendID(data, resp.ID)
		data = append(data, `,"result":`...)
		if len(result) >= copyResultBelow {
			// A page is written where it lies, between the envelope's
			// head and tail, rather than copied after the head.
			return c.writeLine(data, result, []byte("}\n"))
		}
		data = append(data, result...)
		data = append(data, "}\n"...)
	}
	return c.writeLine(data)
}

// copyResultBelow: a result shorter than this is copied into its
// envelope and written in one system call; a longer one is written in
// place, in three.
const copyResultBelow = 64 << 10

// writeLine writes one whole message, made of parts, counting it as
// pending meanwhile. No other message comes between its parts.
func (c *stdioConn) writeLine(parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	c.mu.Lock()
	c.pending += n
	c.writers++
	c.mu.Unlock()
	c.wmu.Lock()
	var err error
	for _, p := range parts {
		if _, err = c.out.Write(p); err != nil {
			break
		}
	}
	c.wmu.Unlock()
	c.mu.Lock()
	c.pending -= n
	c.writers--
	c.cond.Broadcast()
	c.mu.Unlock()
	return err
}

// writeError answers id (nil: null) with a JSON-RPC error.
func (c *stdioConn) writeError(id *jsonrpc.ID, code int64, message string) {
	data := []byte(`{"jsonrpc":"2.0","id":`)
	if id == nil {
		data = append(data, "null"...)
	} else {
		data = appendID(data, *id)
	}
	data = append(data, `,"error":{"code":`...)
	data = strconv.AppendInt(data, code, 10)
	data = append(data, `,"message":`...)
	data = jsontext.AppendString(data, message)
	c.writeLine(append(data, "}}\n"...))
}

// writeToolError answers a tools/call with the contract's error document.
func (c *stdioConn) writeToolError(id jsonrpc.ID, e *toolError) {
	res := errorResult(e)
	var body []byte
	if c.structured {
		withStructure(res)
		body, _ = json.Marshal(res)
	} else {
		body, _ = encodeToolResult(res, false)
	}
	data := []byte(`{"jsonrpc":"2.0","id":`)
	data = appendID(data, id)
	data = append(data, `,"result":`...)
	data = append(data, body...)
	c.writeLine(append(data, "}\n"...))
}

func appendID(b []byte, id jsonrpc.ID) []byte {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.AppendInt(b, v, 10)
	case string:
		s, _ := json.Marshal(v)
		return append(b, s...)
	}
	return append(b, "null"...)
}

func idText(id jsonrpc.ID) string { return string(appendID(nil, id)) }

// The token go-sdk marshals in place of an encoded result.
var tokenPrefix = []byte(`{"fsmcp_encoded":`)

func tokenNumber(b []byte) (uint64, bool) {
	if !bytes.HasPrefix(b, tokenPrefix) || len(b) < len(tokenPrefix)+2 || b[len(b)-1] != '}' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[len(tokenPrefix):len(b)-1]), 10, 64)
	return n, err == nil
}

// stash keeps an encoded result for Write and returns its token.
func (c *stdioConn) stash(encoded []byte) []byte {
	n := c.seq.Add(1)
	c.encoded.Store(n, encoded)
	return append(strconv.AppendUint(append([]byte(nil), tokenPrefix...), n, 10), '}')
}

// encodedResult is a CallToolResult whose JSON is already made. It embeds
// the result so that go-sdk still sees a *CallToolResult's methods.
type encodedResult struct {
	*mcp.CallToolResult
	json []byte
}

// MarshalJSON returns the encoding made once (HTTP) or its token (stdio).
func (r *encodedResult) MarshalJSON() ([]byte, error) { return r.json, nil }

// protocolWithResultType is the first protocol version whose results carry
// "resultType" (go-sdk's clientSupportsMultiRoundTrip).
const protocolWithResultType = "2026-07-28"

// encodeResult is a receiving middleware: it encodes a tool call's result
// in one pass, for stdio into the connection's stash. A result this
// encoder does not cover (structured content, other content types,
// annotations, input requests) goes to go-sdk unchanged.
func encodeResult(conn *stdioConn) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			ctr, ok := res.(*mcp.CallToolResult)
			if err != nil || !ok || method != "tools/call" {
				return res, err
			}
			complete := true
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				if ip := ss.InitializeParams(); ip != nil {
					complete = ip.ProtocolVersion >= protocolWithResultType
				}
			}
			b, ok := encodeToolResult(ctr, complete)
			if !ok {
				return res, nil
			}
			if conn != nil {
				b = conn.stash(b)
			}
			return &encodedResult{CallToolResult: ctr, json: b}, nil
		}
	}
}

// encodeToolResult encodes res as go-sdk would, in one pass; ok is false
// for a result it does not cover. complete adds "resultType":"complete".
func encodeToolResult(res *mcp.CallToolResult, complete bool) (b []byte, ok bool) {
	if res.StructuredContent != nil || res.InputRequests != nil || res.RequestState != "" {
		return nil, false
	}
	size := 64
	for _, c := range res.Content {
		if st, ok := c.(*splicedText); ok {
			size += len(st.head) + len(st.run) + len(st.tail) + len(st.tail)/8 + 32
			continue
		}
		tc, ok := c.(*mcp.TextContent)
		// go-sdk would repair invalid UTF-8; appendString requires it valid.
		if !ok || tc.Meta != nil || tc.Annotations != nil || !utf8.ValidString(tc.Text) {
			return nil, false
		}
		size += len(tc.Text) + len(tc.Text)/8 + 32
	}
	b = make([]byte, 0, size)
	b = append(b, '{')
	if len(res.Meta) > 0 {
		m, err := json.Marshal(res.Meta)
		if err != nil {
			return nil, false
		}
		b = append(b, `"_meta":`...)
		b = append(b, m...)
		b = append(b, ',')
	}
	b = append(b, `"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		if st, ok := c.(*splicedText); ok {
			b = st.appendText(b)
		} else {
			b = jsontext.AppendString(b, c.(*mcp.TextContent).Text)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if complete {
		b = append(b, `,"resultType":"complete"`...)
	}
	return append(b, '}'), true
}
