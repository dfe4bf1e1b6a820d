package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Strict schemas: unknown fields, wrong types and case variants are
// refused before anything reaches the worker. The path names a worker hook
// that would panic (answering internal) had the call been forwarded.
func TestStrictSchemas(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	trap := hookPrefix + "panic:"
	cases := []map[string]any{
		{"path": trap, "bogus": 1},
		{"Path": trap},
		{"path": 5},
		{"path": trap, "offset": "0"},
		{"path": trap, "offset": 1.5},
		{"path": trap, "length": true},
		{"path": []string{trap}},
		{"path": nil},
	}
	for _, args := range cases {
		s.wantErr("fs_read", args, "invalid_argument")
		s.wantErr("fs_stat", args, "invalid_argument")
	}
	s.wantErr("fs_list", map[string]any{"path": trap, "cursor": 7}, "invalid_argument")
}

// _meta.args_sha256 is verified over the exact received argument bytes
// when present, never required.
func TestArgsSHA256(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	raw := json.RawMessage(`{"path":"a.txt"}`)
	sum := sha256.Sum256(raw)
	good := hex.EncodeToString(sum[:])
	call := func(meta mcp.Meta) reply {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: "fs_stat", Arguments: raw})
		if err != nil {
			t.Fatal(err)
		}
		return checkReply(t, "fs_stat", res)
	}
	if r := call(mcp.Meta{"args_sha256": good}); r.isError {
		t.Fatalf("matching args_sha256 refused: %s", r.text)
	}
	bad := hex.EncodeToString(make([]byte, 32))
	if r := call(mcp.Meta{"args_sha256": bad}); r.code() != "args_mismatch" {
		t.Fatalf("wrong args_sha256 = %s, want args_mismatch", r.text)
	}
	for _, v := range []any{"ABC", 12, good[:63], "Z" + good[1:]} {
		if r := call(mcp.Meta{"args_sha256": v}); r.code() != "invalid_argument" {
			t.Fatalf("args_sha256 %v = %s, want invalid_argument", v, r.text)
		}
	}
}

// rawSession speaks JSON-RPC lines to fsmcp directly, so a test can send
// bytes a well-behaved client library would never produce.
type rawSession struct {
	t   *testing.T
	in  io.Writer
	out *bufio.Reader
	id  int
}

func startRaw(t *testing.T, root string) *rawSession {
	s := spawn(t, root)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	r := &rawSession{t: t, in: s.stdin, out: bufio.NewReader(stdout)}
	r.request("initialize", []byte(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`))
	fmt.Fprintln(r.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

// request sends one request with params given as raw bytes and returns
// the response's result (or error) object.
func (r *rawSession) request(method string, params []byte) map[string]any {
	r.t.Helper()
	r.id++
	msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":`, r.id, method)
	msg = append(append(msg, params...), "}\n"...)
	if _, err := r.in.Write(msg); err != nil {
		r.t.Fatal(err)
	}
	for {
		line, err := r.out.ReadBytes('\n')
		if err != nil {
			r.t.Fatalf("read response: %v", err)
		}
		var resp map[string]any
		if err := json.Unmarshal(line, &resp); err != nil {
			r.t.Fatalf("response is not JSON: %q", line)
		}
		if id, _ := resp["id"].(float64); int(id) == r.id {
			if res, ok := resp["result"].(map[string]any); ok {
				return res
			}
			return resp
		}
	}
}

// toolCode returns the error code of a raw tools/call result, or "ok".
func (r *rawSession) toolCode(args []byte) string {
	r.t.Helper()
	res := r.request("tools/call", append(append([]byte(`{"name":"fs_stat","arguments":`), args...), '}'))
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		r.t.Fatalf("tools/call result %v", res)
	}
	var doc struct {
		OK    bool
		Error struct{ Code string }
	}
	if err := json.Unmarshal([]byte(content[0].(map[string]any)["text"].(string)), &doc); err != nil {
		r.t.Fatal(err)
	}
	if doc.OK {
		return "ok"
	}
	return doc.Error.Code
}

// Invalid UTF-8 and lone surrogates would be silently repaired to U+FFFD
// by a JSON decoder; a repaired name must never address a file.
func TestRepairedNamesRefused(t *testing.T) {
	root, _ := tree(t)
	r := startRaw(t, root)
	cases := map[string]string{
		`{"path":"a.txt"}`:                   "ok",
		`{"path":"a\u002etxt"}`:              "ok",
		`{"path":"\ud83d\ude00"}`:            "not_found", // a valid pair
		`{"path":"a\ud800.txt"}`:             "invalid_argument",
		`{"path":"a\udc00.txt"}`:             "invalid_argument",
		`{"path":"a\ud800\u0041.txt"}`:       "invalid_argument",
		"{\"path\":\"a\xff.txt\"}":           "invalid_argument",
		`{"path":"a\\ud800.txt"}`:            "not_found", // an escaped backslash, not an escape
		`{"path":"\u0000"}`:                  "invalid_argument",
		`{"path":"x"} `:                      "not_found",
		`{"path":"x","path":"a.txt"}`:        "ok",
		`{"path":"a.txt","path_base64":"x"}`: "invalid_argument",
	}
	keys := make([]string, 0, len(cases))
	for k := range cases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, args := range keys {
		if got := r.toolCode([]byte(args)); got != cases[args] {
			t.Errorf("fs_stat %s = %s, want %s", args, got, cases[args])
		}
	}
}
