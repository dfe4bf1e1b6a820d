package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary is also fsmcp: TestMain dispatches the worker
// subcommand, and FSMCP_TEST_FRONTEND=1 runs the front-end, so every test
// drives real processes built with the test's own hooks and -race.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.WorkerSubcommand {
		os.Exit(worker.Main(os.Args[2:], workerHooks()))
	}
	if os.Getenv("FSMCP_TEST_FRONTEND") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := frontend.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, frontendHooks())
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for a process's stderr copier and the
// test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fsmcpCommand is the command line of a front-end serving root.
func fsmcpCommand(root string, flags ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"--root", root}, flags...)...)
	cmd.Env = append(os.Environ(), "FSMCP_TEST_FRONTEND=1")
	return cmd
}

// server is a running fsmcp with a connected MCP client.
type server struct {
	t       *testing.T
	cmd     *exec.Cmd
	session *mcp.ClientSession
	stderr  *syncBuffer
}

// start runs fsmcp on root and connects a go-sdk client over stdio.
func start(t *testing.T, root string, flags ...string) *server {
	t.Helper()
	cmd := fsmcpCommand(root, flags...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}
	s := &server{t: t, cmd: cmd, session: session, stderr: stderr}
	t.Cleanup(func() { session.Close() })
	return s
}

// reply is one tool call's outcome as the client sees it.
type reply struct {
	doc     map[string]any
	text    string
	isError bool
	meta    mcp.Meta
}

func (r reply) code() string {
	e, _ := r.doc["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) str(key string) string {
	s, _ := r.doc[key].(string)
	return s
}

func (r reply) num(key string) int64 {
	f, _ := r.doc[key].(float64)
	return int64(f)
}

// call calls a tool and checks the reply's shape: one text block with one
// JSON document whose ok agrees with isError.
func (s *server) call(name string, args any) reply {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("%s(%v): protocol error %v\nstderr:\n%s", name, args, err, s.stderr.String())
	}
	return checkReply(s.t, name, res)
}

func checkReply(t *testing.T, name string, res *mcp.CallToolResult) reply {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks, want 1", name, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T, want text", name, res.Content[0])
	}
	r := reply{text: tc.Text, isError: res.IsError, meta: res.Meta}
	if err := json.Unmarshal([]byte(tc.Text), &r.doc); err != nil {
		t.Fatalf("%s: reply is not one JSON document: %v\n%s", name, err, tc.Text)
	}
	if ok, _ := r.doc["ok"].(bool); ok == res.IsError {
		t.Fatalf("%s: ok=%v but isError=%v: %s", name, ok, res.IsError, tc.Text)
	}
	if res.IsError {
		if r.code() == "" {
			t.Fatalf("%s: error reply without code: %s", name, tc.Text)
		}
		sv, _ := res.Meta["scope_violation"].(bool)
		if sv != (r.code() == "outside_root") {
			t.Fatalf("%s: scope_violation=%v for code %s", name, sv, r.code())
		}
	}
	return r
}

// wantOK fails unless the call succeeded.
func (s *server) wantOK(name string, args any) reply {
	s.t.Helper()
	r := s.call(name, args)
	if r.isError {
		s.t.Fatalf("%s(%v) = %s, want ok", name, args, r.text)
	}
	return r
}

// wantErr fails unless the call failed with code.
func (s *server) wantErr(name string, args any, code string) reply {
	s.t.Helper()
	r := s.call(name, args)
	if !r.isError || r.code() != code {
		s.t.Fatalf("%s(%v) = %s, want error %s", name, args, r.text, code)
	}
	return r
}

// noHostPath fails if text names the host location of dir.
func noHostPath(t *testing.T, text, dir string) {
	t.Helper()
	if strings.Contains(text, dir) {
		t.Fatalf("reply names a host path (%s): %s", dir, text)
	}
}
