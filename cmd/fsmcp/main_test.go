package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary is also fsmcp: TestMain dispatches the worker
// subcommand, and FSMCP_TEST_FRONTEND=1 runs the front-end, so every test
// drives real processes built with the test's own hooks and -race.
func TestMain(m *testing.M) {
	if code, ok := subcommand(os.Args, workerHooks()); ok {
		os.Exit(code)
	}
	if os.Getenv("FSMCP_TEST_FRONTEND") == "1" {
		os.Exit(serve(os.Args[1:], frontendHooks()))
	}
	// Every fsmcp a test starts without --state-dir keeps its state in a
	// directory of this run, not in the user's. Tests that run fsmcp as
	// another user share it as users share /tmp: each makes its own
	// subdirectory for its root there.
	state, err := os.MkdirTemp("", "fsmcp-test-state-")
	if err == nil {
		err = os.Chmod(state, 0o755)
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(state, "fsmcp"), 0o755)
	}
	if err == nil {
		err = os.Chmod(filepath.Join(state, "fsmcp"), 0o1777)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", state)
	os.Unsetenv("STATE_DIRECTORY")
	code := m.Run()
	os.RemoveAll(state)
	os.Exit(code)
}

// stateDirIn returns a --state-dir flag naming a new directory in parent
// that uid owns, for a test that runs fsmcp as another user: the run's
// shared state directory may already hold a root's subdirectory of
// another user, when a deleted root's inode is given to this test's root.
// parent must be searchable by uid.
func stateDirIn(t *testing.T, parent string, uid, gid int) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, "state-")
	if err == nil {
		err = os.Chown(d, uid, gid)
	}
	if err != nil {
		t.Fatal(err)
	}
	return "--state-dir=" + d
}

// fsmcpCommand is the command line of a front-end serving root.
func fsmcpCommand(root string, flags ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"--root", root}, withNative(flags)...)...)
	cmd.Env = append(os.Environ(), "FSMCP_TEST_FRONTEND=1", "GORACE=atexit_sleep_ms=0")
	return cmd
}

// server is a running fsmcp with a connected MCP client. The test owns
// the process, so it can see its pid, its worker and its exit status.
type server struct {
	t       *testing.T
	cmd     *exec.Cmd
	session *mcp.ClientSession
	stderr  *syncBuffer
	stdin   io.WriteCloser
	exited  chan struct{}
	waitErr error
}

// start runs fsmcp on root and connects a go-sdk client over its stdio.
func start(t *testing.T, root string, flags ...string) *server {
	t.Helper()
	return startWith(t, root, nil, "", flags...)
}

// spawn prepares fsmcp on root; run starts it. Cleanup ends it.
func spawn(t *testing.T, root string, flags ...string) *server {
	t.Helper()
	cmd := fsmcpCommand(root, flags...)
	s := &server{t: t, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdin = stdin
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-s.exited
		}
	})
	return s
}

func (s *server) run() error {
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	return nil
}

// wait waits up to d for fsmcp to exit and returns its exit code.
func (s *server) wait(d time.Duration) int {
	s.t.Helper()
	select {
	case <-s.exited:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		s.t.Fatalf("fsmcp did not exit within %v\nstderr:\n%s", d, s.stderr.String())
		return -1
	}
}

// workerPid returns the pid of fsmcp's worker process.
func (s *server) workerPid() int {
	s.t.Helper()
	kids := childPids(s.cmd.Process.Pid)
	if len(kids) != 1 {
		s.t.Fatalf("fsmcp has children %v, want one worker", kids)
	}
	return kids[0]
}

// childPids lists the children of pid, across all its threads (the worker
// is forked from a locked thread, not always the main one).
func childPids(pid int) []int {
	var kids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(field)
			kids = append(kids, n)
		}
	}
	return kids
}

// gone reports whether pid no longer runs (absent, or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

// waitGone fails unless pid is gone within d.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after %v", pid, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// What the end-to-end tests share with the front-end's in-process ones.
const tempPrefix = fronttest.TempPrefix

type syncBuffer = fronttest.SyncBuffer

var (
	tree         = fronttest.Tree
	editRoot     = fronttest.EditRoot
	fileLines    = fronttest.FileLines
	sha          = fronttest.SHA
	noHostPath   = fronttest.NoHostPath
	readFile     = fronttest.ReadFile
	writeFile    = fronttest.WriteFile
	noTempFiles  = fronttest.NoTempFiles
	snapshot     = fronttest.Snapshot
	sameSnapshot = fronttest.SameSnapshot
)

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
		s.t.Fatalf("%s(%.200v): protocol error %v\nstderr:\n%.2000s", name, args, err, s.stderr.String())
	}
	return checkReply(s.t, name, res)
}

// checkReply reads a tool's result, checking its shape (fronttest.Check).
func checkReply(t *testing.T, name string, res *mcp.CallToolResult) reply {
	t.Helper()
	r := fronttest.Check(t, name, res)
	return reply{doc: r.Doc, text: r.Text, isError: r.IsError, meta: r.Meta}
}

// wantOK fails unless the call succeeded.
func (s *server) wantOK(name string, args any) reply {
	s.t.Helper()
	r := s.call(name, args)
	if r.isError {
		s.t.Fatalf("%s(%.200v) = %.2000s, want ok", name, args, r.text)
	}
	return r
}

// wantErr fails unless the call failed with code.
func (s *server) wantErr(name string, args any, code string) reply {
	s.t.Helper()
	r := s.call(name, args)
	if !r.isError || r.code() != code {
		s.t.Fatalf("%s(%.200v) = %.2000s, want error %s", name, args, r.text, code)
	}
	return r
}
