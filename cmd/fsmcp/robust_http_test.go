package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawHTTPSession is one Streamable HTTP session spoken by hand, message by
// message, so that a test can send what go-sdk's client never would.
type rawHTTPSession struct {
	t        *testing.T
	h        *httpServer
	protocol string
	id       string // Mcp-Session-Id
}

// rawMessage is a JSON-RPC message as the server sent it.
type rawMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func (m rawMessage) String() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// toolText is the first text block of a tools/call result.
func (m rawMessage) toolText() string {
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	json.Unmarshal(m.Result, &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// rawHTTPInit opens a session at protocol, declaring form elicitation.
func rawHTTPInit(t *testing.T, h *httpServer, protocol string) *rawHTTPSession {
	t.Helper()
	s := &rawHTTPSession{t: t, h: h, protocol: protocol}
	resp := s.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocol +
		`","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.id = resp.Header.Get("Mcp-Session-Id")
	if m := s.next(resp); resp.StatusCode != http.StatusOK || s.id == "" || m.Error != nil {
		t.Fatalf("initialize: %s, session %q, %v", resp.Status, s.id, m)
	}
	resp.Body.Close()
	if resp := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %s", resp.Status)
	} else {
		resp.Body.Close()
	}
	return s
}

// post sends one message in the session and returns the response, whose
// body the caller reads (next) and closes.
func (s *rawHTTPSession) post(body string) *http.Response {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "POST", s.h.base+"/mcp", strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.h.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", s.protocol)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST %s: %v", body, err)
	}
	return resp
}

// next reads the next JSON-RPC message of resp: its whole body when it is
// application/json, else its next SSE "message" event.
func (s *rawHTTPSession) next(resp *http.Response) rawMessage {
	s.t.Helper()
	var m rawMessage
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil || json.Unmarshal(b, &m) != nil {
			s.t.Fatalf("%s: body %q (%v)", resp.Status, b, err)
		}
		return m
	}
	br, ok := resp.Body.(*sseBody)
	if !ok {
		br = &sseBody{ReadCloser: resp.Body, r: bufio.NewReader(resp.Body)}
		resp.Body = br
	}
	var data []byte
	for {
		line, err := br.r.ReadBytes('\n')
		if err != nil {
			s.t.Fatalf("the event stream ended before a message: %v", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimSpace(line[len("data:"):])...)
		case len(line) == 0 && len(data) > 0:
			if err := json.Unmarshal(data, &m); err != nil {
				s.t.Fatalf("event %q: %v", data, err)
			}
			return m
		}
	}
}

// sseBody keeps the reader of an event stream between calls of next.
type sseBody struct {
	io.ReadCloser
	r *bufio.Reader
}

// A JSON-RPC id still in flight in an HTTP session is refused when sent
// again in that session, and only there: the second call is answered with
// -32600 naming the id (HTTP 400), never run and never dropped; the first
// call goes on and answers its own result; once it has answered, the id
// is accepted again. The first call is held deterministically on an
// approval (--ask) the test answers when it is ready. go-sdk's Streamable
// HTTP handler makes this refusal (the fsmcp layer in front of it adds
// nothing); this test keeps it, at both revisions fsmcp serves with
// sessions.
func TestRobustHTTPDuplicateIDInFlight(t *testing.T) {
	root, _ := tree(t)
	h := startHTTP(t, root, "--ask", "fs_write")
	for _, protocol := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(protocol, func(t *testing.T) {
			name := "held-" + protocol + ".txt"
			s := rawHTTPInit(t, h, protocol)
			first := s.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_write","arguments":{"path":"` +
				name + `","content":"first","if_sha256":null}}}`)
			defer first.Body.Close()
			ask := s.next(first)
			if ask.Method != "elicitation/create" {
				t.Fatalf("the held write sent %v, want its approval question", ask)
			}

			// The same id while the write waits for its approval.
			dup := s.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"a.txt"}}}`)
			m := s.next(dup)
			dup.Body.Close()
			if dup.StatusCode != http.StatusBadRequest || string(m.ID) != "7" || m.Error == nil ||
				m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "in-flight request ID 7") {
				t.Fatalf("a second call with id 7 in flight: %s %v, want 400 with -32600 naming id 7", dup.Status, m)
			}

			// The same id in another session is another call.
			other := rawHTTPInit(t, h, protocol)
			resp := other.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"a.txt"}}}`)
			if m := other.next(resp); string(m.ID) != "7" || !strings.Contains(m.toolText(), `"ok":true`) {
				t.Errorf("id 7 in another session: %s %v %s", resp.Status, m, m.toolText())
			}
			resp.Body.Close()

			// The held write answers its own call, once approved.
			approve := s.post(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"action":"accept","content":{"remember":false}}}`)
			approve.Body.Close()
			if approve.StatusCode != http.StatusAccepted {
				t.Fatalf("the approval: %s", approve.Status)
			}
			m = s.next(first)
			if string(m.ID) != "7" || !strings.Contains(m.toolText(), `"ok":true`) || !strings.Contains(m.toolText(), `"created":true`) {
				t.Fatalf("the held write answered %v %s, want its own ok", m, m.toolText())
			}
			if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != "first" {
				t.Errorf("%s = %q, %v after the write", name, b, err)
			}

			// Answered: id 7 is free again in this session.
			again := s.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"a.txt"}}}`)
			if m := s.next(again); again.StatusCode != http.StatusOK || string(m.ID) != "7" || !strings.Contains(m.toolText(), `"ok":true`) {
				t.Errorf("id 7 after its call answered: %s %v %s", again.Status, m, m.toolText())
			}
			again.Body.Close()
		})
	}
}
