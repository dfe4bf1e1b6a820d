package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// activateEnv makes the test binary act as systemd does for socket
// activation: it sets LISTEN_PID to its own pid and LISTEN_FDS=1, then
// execs itself (keeping the pid, and descriptor 3 from the test). It runs
// from init, before TestMain, because LISTEN_PID must name the process
// that serves.
const activateEnv = "FSMCP_TEST_ACTIVATE"

func init() {
	if os.Getenv(activateEnv) != "1" {
		return
	}
	env := slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, activateEnv+"=") })
	env = append(env, "LISTEN_FDS=1", "LISTEN_PID="+strconv.Itoa(os.Getpid()))
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	fmt.Fprintf(os.Stderr, "exec: %v\n", err)
	os.Exit(3)
}

// httpServer is a running fsmcp serving Streamable HTTP.
type httpServer struct {
	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	base   string        // http://127.0.0.1:PORT
	token  string
	stderr *syncBuffer
}

var servingLine = regexp.MustCompile(`fsmcp \S+: serving .* on http://(\S+)/mcp \(([a-z-]+); bearer token(?:: ([^\s)]+))?`)

// startHTTP runs fsmcp --transport http on a free loopback port.
func startHTTP(t testing.TB, root string, flags ...string) *httpServer {
	t.Helper()
	return runHTTP(t, fsmcpCommand(root, append([]string{"--transport", "http", "--listen", "127.0.0.1:0"}, flags...)...), "bound")
}

// runHTTP starts cmd and waits until it says where it serves, and how it
// got its listener (want).
func runHTTP(t testing.TB, cmd *exec.Cmd, want string) *httpServer {
	t.Helper()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := servingLine.FindStringSubmatch(stderr.String()); m != nil {
			if m[2] != want {
				t.Fatalf("listener is %s, want %s", m[2], want)
			}
			return &httpServer{t: t, cmd: cmd, exited: done, base: "http://" + m[1], token: m[3], stderr: stderr}
		}
		select {
		case <-done:
			t.Fatalf("fsmcp exited before serving: %v\nstderr:\n%s", cmd.ProcessState, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("fsmcp did not start serving\nstderr:\n%s", stderr.String())
		}
	}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connect opens an MCP session with the go-sdk Streamable HTTP client, at
// the protocol revision given ("" for the SDK's newest).
func (h *httpServer) connect(protocol string) *server {
	h.t.Helper()
	return h.connectWith(protocol, nil)
}

// connectWith is connect with a client built with opts.
func (h *httpServer) connectWith(protocol string, opts *mcp.ClientOptions) *server {
	h.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-http-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{
		Endpoint:   h.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{h.token, http.DefaultTransport}},
		MaxRetries: -1,
	}
	session, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		h.t.Fatalf("connect: %v\nstderr:\n%s", err, h.stderr.String())
	}
	h.t.Cleanup(func() { session.Close() })
	t, _ := h.t.(*testing.T)
	return &server{t: t, cmd: h.cmd, session: session, stderr: h.stderr}
}

// post sends a raw initialize request to /mcp with the given headers and
// returns the status code.
func (h *httpServer) post(header map[string]string) int {
	h.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequest("POST", h.base+"/mcp", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		h.t.Errorf("401 without a Bearer challenge: %q", resp.Header.Get("WWW-Authenticate"))
	}
	return resp.StatusCode
}

func toolNames(t *testing.T, s *server) []string {
	t.Helper()
	res, err := s.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestHTTPSession runs a whole session over Streamable HTTP, at the
// client's newest revision (2025-11-25 after its fallback) and at
// 2025-11-25 asked for directly, both with Mcp-Session-Id:
// initialize, tools/list, every read tool, and a write.
func TestHTTPSession(t *testing.T) {
	root, _ := tree(t)
	h := startHTTP(t, root)
	if h.token == "" {
		t.Fatalf("no generated token printed:\n%s", h.stderr.String())
	}
	if n := strings.Count(h.stderr.String(), h.token); n != 1 {
		t.Errorf("the token appears %d times on stderr, want once", n)
	}
	for _, protocol := range []string{"", "2025-11-25"} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			h.t = t
			s := h.connect(protocol)
			if info := s.session.InitializeResult().ServerInfo; info.Name != "fsmcp" {
				t.Errorf("server name %q", info.Name)
			}
			if protocol != "" && s.session.ID() == "" {
				t.Errorf("no Mcp-Session-Id at %s", protocol)
			}
			names := toolNames(t, s)
			for _, want := range []string{"fs_stat", "fs_list", "fs_read", "fs_glob", "fs_grep", "fs_write"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list = %v, missing %s", names, want)
				}
			}
			if r := s.wantOK("fs_stat", map[string]any{"path": "a.txt"}); r.str("sha256") != sha([]byte("hello\n")) {
				t.Errorf("fs_stat = %s", r.text)
			}
			if r := s.wantOK("fs_stat", map[string]any{"path": ""}); r.doc["confinement"] == nil {
				t.Errorf("fs_stat(root) has no confinement: %s", r.text)
			}
			if r := s.wantOK("fs_list", map[string]any{"path": "sub"}); !strings.Contains(r.text, `"name":"b.txt"`) {
				t.Errorf("fs_list(sub) = %s", r.text)
			}
			if r := s.wantOK("fs_read", map[string]any{"path": "sub/b.txt"}); r.str("content") != "bee\n" {
				t.Errorf("fs_read = %s", r.text)
			}
			if r := s.wantOK("fs_glob", map[string]any{"path": "", "pattern": "*.txt"}); !strings.Contains(r.text, `"sub/b.txt"`) {
				t.Errorf("fs_glob = %s", r.text)
			}
			if r := s.wantOK("fs_grep", map[string]any{"pattern": "be+", "path": "sub"}); !strings.Contains(r.text, `"sub/b.txt"`) {
				t.Errorf("fs_grep = %s", r.text)
			}
			s.wantErr("fs_read", map[string]any{"path": "link_out"}, "outside_root")
			name := fmt.Sprintf("written-%d.txt", len(protocol))
			s.wantOK("fs_write", map[string]any{"path": name, "content": "over http\n", "if_sha256": nil})
			if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != "over http\n" {
				t.Errorf("after fs_write: %q, %v", b, err)
			}
		})
	}
}

// TestHTTPConcurrentSessions runs two sessions at once and shows they
// share the one worker.
func TestHTTPConcurrentSessions(t *testing.T) {
	root, _ := tree(t)
	h := startHTTP(t, root)
	sessions := []*server{h.connect(""), h.connect("2025-11-25")}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for i, s := range sessions {
		for j := 0; j < 4; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 10; k++ {
					res, err := s.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": "a.txt"}})
					if err != nil {
						errs <- fmt.Sprintf("session %d: %v", i, err)
						return
					}
					if tc := res.Content[0].(*mcp.TextContent); res.IsError || !strings.Contains(tc.Text, `"content":"hello\n"`) {
						errs <- fmt.Sprintf("session %d: %s", i, tc.Text)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if kids := children(t, h.cmd.Process.Pid); len(kids) != 1 {
		t.Errorf("front-end has %d child processes %v, want one worker", len(kids), kids)
	}
}

// children lists the pids whose parent is pid. (The task children files
// would miss a child started from another thread, as the worker is.)
func children(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ")".
		rest := string(st[strings.LastIndexByte(string(st), ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	return kids
}

func TestHTTPAuth(t *testing.T) {
	root, _ := tree(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "correct-horse-battery-staple-42"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHTTP(t, root, "--token-file", tokenFile)
	if h.token != "" || strings.Contains(h.stderr.String(), token) {
		t.Fatalf("a token from --token-file was printed:\n%s", h.stderr.String())
	}
	for _, c := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"missing", nil, 401},
		{"wrong", map[string]string{"Authorization": "Bearer correct-horse-battery-staple-43"}, 401},
		{"prefix", map[string]string{"Authorization": "Bearer correct-horse"}, 401},
		{"longer", map[string]string{"Authorization": "Bearer " + token + "x"}, 401},
		{"basic", map[string]string{"Authorization": "Basic " + token}, 401},
		{"empty", map[string]string{"Authorization": "Bearer "}, 401},
		{"right", map[string]string{"Authorization": "Bearer " + token}, 200},
		{"scheme case", map[string]string{"Authorization": "bearer " + token}, 200},
	} {
		if got := h.post(c.header); got != c.want {
			t.Errorf("%s: POST /mcp = %d, want %d", c.name, got, c.want)
		}
	}
	// The go-sdk client with a wrong token cannot connect at all.
	h.token = "wrong-token-wrong-token"
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{h.token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("connect with a wrong token: %v, want Unauthorized", err)
	}
}

func TestHTTPOrigin(t *testing.T) {
	root, _ := tree(t)
	h := startHTTP(t, root, "--allow-origin", "https://App.Example:8443")
	auth := "Bearer " + h.token
	for _, c := range []struct {
		origin, host string
		want         int
	}{
		{"", "", 200},
		{"http://localhost:5173", "", 200},
		{"http://127.0.0.1", "", 200},
		{"http://[::1]:80", "", 200},
		{"https://app.example:8443", "", 200},
		{"https://app.example", "", 403},
		{"http://evil.example", "", 403},
		{"http://localhost.evil.example", "", 403},
		{"null", "", 403},
		{"file://", "", 403},
		// DNS rebinding: a foreign name resolving to 127.0.0.1.
		{"", "evil.example", 403},
	} {
		hdr := map[string]string{"Authorization": auth}
		if c.origin != "" {
			hdr["Origin"] = c.origin
		}
		if c.host != "" {
			hdr["Host"] = c.host
		}
		if got := h.post(hdr); got != c.want {
			t.Errorf("Origin %q Host %q: POST /mcp = %d, want %d", c.origin, c.host, got, c.want)
		}
	}
	// A foreign origin is refused even without a token: 403 before 401.
	if got := h.post(map[string]string{"Origin": "http://evil.example"}); got != 403 {
		t.Errorf("foreign Origin without token = %d, want 403", got)
	}
}

func TestHTTPHealth(t *testing.T) {
	root, _ := tree(t)
	h := startHTTP(t, root)
	resp, err := http.Get(h.base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var doc map[string]any
	if resp.StatusCode != 200 || json.Unmarshal(b, &doc) != nil || doc["status"] != "ok" || len(doc) != 1 {
		t.Errorf("GET /health = %d %q", resp.StatusCode, b)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/health", 405},
		{"GET", "/", 404},
		{"GET", "/mcp/../etc", 404},
		{"GET", "/mcp", 401},
	} {
		req, _ := http.NewRequest(c.method, h.base+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}

// TestHTTPRefusesRemoteListen: a non-loopback --listen needs
// --allow-remote, and is refused before anything binds.
func TestHTTPRefusesRemoteListen(t *testing.T) {
	root, _ := tree(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		cmd := fsmcpCommand(root, "--transport", "http", "--listen", addr)
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "--allow-remote") {
			t.Errorf("--listen %s: exit %d (%v)\n%s", addr, code, err, out)
		}
	}
}

// TestHTTPFrontendCannotConnect: once serving, the front-end's own
// attempts to connect to a listening loopback port (TCP, MPTCP or UDP), to
// bind a new port, or to open a file are refused by the kernel, while the
// test process connects to the same port freely. Two layers refuse: the
// front-end's seccomp filter refuses socket(2) itself (EPERM), and
// Landlock refuses TCP bind and connect and every file open (EACCES).
func TestHTTPFrontendCannotConnect(t *testing.T) {
	root, _ := tree(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("the test itself cannot connect: %v", err)
	}
	c.Close()
	waitFor(t, func() bool { return accepted.Load() == 1 })

	h := startHTTP(t, root)
	s := h.connect("")
	for _, c := range []struct{ action, arg string }{
		{"frontend-connect", ln.Addr().String()},
		{"frontend-connect-mptcp", ln.Addr().String()},
		{"frontend-connect-udp", ln.Addr().String()},
		{"frontend-listen", "127.0.0.1:0"},
		{"frontend-listen-mptcp", "127.0.0.1:0"},
		{"frontend-open", filepath.Join(root, "a.txt")},
	} {
		r := s.wantErr("fs_stat", map[string]any{"path": hookPrefix + c.action + ":" + c.arg}, "internal")
		msg := r.doc["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, "permission denied") && !strings.Contains(msg, "operation not permitted") {
			t.Errorf("%s(%s) in the front-end: %s, want the kernel's refusal", c.action, c.arg, msg)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted.Load(); n != 1 {
		t.Errorf("the listener accepted %d connections, want only the test's own", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	// Generous: a loaded machine (eight test suites on two cores) may take
	// seconds to start a process; a condition met sooner returns sooner.
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTPCancelKillsRG: over HTTP, a client giving up on a long fs_grep
// kills its rg within a second (watched in the process table).
func TestHTTPCancelKillsRG(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// Text on which a Unicode-aware regex falls back to slow matching,
	// hard-linked so rg has minutes of work.
	line := strings.Repeat("héllo wörld ", 8) + "\n"
	first := filepath.Join(root, "slow-00.txt")
	if err := os.WriteFile(first, []byte(strings.Repeat(line, 4<<20/len(line))), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 30; i++ {
		if err := os.Link(first, filepath.Join(root, fmt.Sprintf("slow-%02d.txt", i))); err != nil {
			t.Fatal(err)
		}
	}
	h := startHTTP(t, root)
	for _, protocol := range []string{"", "2025-11-25"} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			h.t = t
			s := h.connect(protocol)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_grep",
					Arguments: map[string]any{"path": "", "pattern": `(\b\w{1,20}\b\s*){40}\b\p{Lu}\b`}})
				done <- err
			}()
			waitFor(t, func() bool { return len(rgUnder(t, h.cmd.Process.Pid)) > 0 })
			cancel()
			cancelled := time.Now()
			if err := <-done; err == nil {
				t.Fatal("a cancelled call succeeded")
			}
			for len(rgUnder(t, h.cmd.Process.Pid)) > 0 {
				if time.Since(cancelled) > time.Second {
					t.Fatalf("rg %v still runs 1s after the client cancelled", rgUnder(t, h.cmd.Process.Pid))
				}
				time.Sleep(10 * time.Millisecond)
			}
			s.wantOK("fs_glob", map[string]any{"path": "", "pattern": "slow-0*"})
		})
	}
}

// rgUnder returns the pids of the rg processes the worker of front-end
// pid runs.
func rgUnder(t *testing.T, pid int) []int {
	t.Helper()
	var rgs []int
	for _, w := range children(t, pid) {
		for _, k := range children(t, w) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", k)); strings.TrimSpace(string(comm)) == "rg" {
				rgs = append(rgs, k)
			}
		}
	}
	return rgs
}

// TestHTTPCancellation: a client that gives up on a call cancels the
// worker's RPC (notifications/cancelled), with the client's newest
// revision and with 2025-11-25 asked for directly.
func TestHTTPCancellation(t *testing.T) {
	root, _ := tree(t)
	h := startHTTP(t, root)
	for i, protocol := range []string{"", "2025-11-25"} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			h.t = t
			s := h.connect(protocol)
			marker := filepath.Join(root, fmt.Sprintf("cancelled-%d", i))
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_stat",
				Arguments: map[string]any{"path": hookPrefix + "wait-cancel:" + marker}})
			if err == nil {
				t.Fatal("the call returned before it was cancelled")
			}
			var got []byte
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if got, err = os.ReadFile(marker); err == nil && len(got) > 0 {
					break
				}
			}
			if string(got) != "context canceled" {
				t.Fatalf("worker RPC after the client cancelled (%v ago): %q, want context canceled\nstderr:\n%s",
					time.Since(start), got, h.stderr.String())
			}
			// The session is still usable.
			s.wantOK("fs_stat", map[string]any{"path": "a.txt"})
		})
	}
}

// TestSocketActivation hands fsmcp a listening socket as descriptor 3
// with LISTEN_FDS=1 and LISTEN_PID set to the serving process, as systemd
// does. fsmcp serves on it, and the only listening socket it holds is the
// inherited one: it never binds.
func TestSocketActivation(t *testing.T) {
	root, _ := tree(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	// --listen names another port: were it used, the test would see it.
	cmd := fsmcpCommand(root, "--transport", "http", "--listen", "127.0.0.1:0")
	cmd.Env = append(cmd.Env, activateEnv+"=1")
	cmd.ExtraFiles = []*os.File{f}
	h := runHTTP(t, cmd, "socket-activated")
	f.Close()
	ln.Close() // the server's descriptor keeps the socket listening
	if h.base != "http://"+ln.Addr().String() {
		t.Errorf("serving at %s, want the inherited %s", h.base, ln.Addr())
	}
	s := h.connect("")
	s.wantOK("fs_stat", map[string]any{"path": "a.txt"})

	listening := listeningSockets(t, h.cmd.Process.Pid)
	if len(listening) != 1 || listening[0] != st.Ino {
		t.Errorf("front-end listening sockets %v, want only the inherited socket:[%d]", listening, st.Ino)
	}
	for _, kid := range children(t, h.cmd.Process.Pid) {
		if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", kid)); strings.Contains(string(env), "LISTEN_") {
			t.Errorf("worker inherited the activation variables: %q", env)
		}
	}
	for _, kid := range children(t, h.cmd.Process.Pid) {
		if l := listeningSockets(t, kid); len(l) != 0 {
			t.Errorf("worker %d holds listening sockets %v", kid, l)
		}
	}
}

// TestSocketActivationRefusesNonListener: descriptor 3 that is a
// connected socket (as with Accept=yes) is refused for HTTP.
func TestSocketActivationRefusesNonListener(t *testing.T) {
	root, _ := tree(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer a.Close()
	defer b.Close()
	cmd := fsmcpCommand(root, "--transport", "http")
	cmd.Env = append(cmd.Env, activateEnv+"=1")
	cmd.ExtraFiles = []*os.File{a}
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "not a listening socket") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// listeningSockets returns the inodes of the TCP sockets in LISTEN state
// that process pid holds a descriptor of.
func listeningSockets(t *testing.T, pid int) []uint64 {
	t.Helper()
	held := map[uint64]bool{}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64)
			held[n] = true
		}
	}
	var out []uint64
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			fl := strings.Fields(sc.Text())
			if len(fl) < 10 || fl[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			ino, _ := strconv.ParseUint(fl[9], 10, 64)
			if held[ino] {
				out = append(out, ino)
			}
		}
		f.Close()
	}
	return out
}

// TestToolsPrefix: every tool is listed and called by its prefixed name.
func TestToolsPrefix(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root, "--tools-prefix", "proj_")
	names := toolNames(t, s)
	if len(names) == 0 {
		t.Fatal("no tools")
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "proj_fs_") {
			t.Errorf("tool %q lacks the prefix", n)
		}
	}
	s.wantOK("proj_fs_stat", map[string]any{"path": "a.txt"})
	res, err := s.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "a.txt"}})
	if err == nil && !res.IsError {
		t.Errorf("the unprefixed name still answers")
	}
}

// TestVersion: --version prints the release, the Go toolchain, the module
// and VCS revision from the build information (a test binary carries no
// revision) and the kernel's Landlock ABI, and starts nothing.
func TestVersion(t *testing.T) {
	cmd := fsmcpCommand("/nonexistent", "--version")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^fsmcp \d+\.\d+\.\d+ \(go[^)]+\)\nmodule github\.com/fsmcp/fsmcp \S+, revision unknown\nkernel landlock ABI (\d+)\n$`)
	m := re.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("--version = %q", out)
	}
	if want := strconv.Itoa(sandbox.KernelABI()); m[1] != want {
		t.Errorf("--version says ABI %s, kernel offers %s", m[1], want)
	}
}

// auditEntry is one line of the audit log.
type auditEntry struct {
	Time            string         `json:"time"`
	Event           string         `json:"event"`
	Session         string         `json:"session"`
	Peer            string         `json:"peer"`
	Tool            string         `json:"tool"`
	Paths           map[string]any `json:"paths"`
	Outcome         string         `json:"outcome"`
	DurationUS      *int64         `json:"duration_us"`
	ReplyBytes      int64          `json:"reply_bytes"`
	ScopeViolation  *bool          `json:"scope_violation"`
	PolicyViolation bool           `json:"policy_violation"`
	Decision        string         `json:"decision"`
	Undo            string         `json:"undo"`
	Undone          string         `json:"undone"`
}

// auditLines parses every audit line in text, failing on a line that
// looks like one but is not valid JSON.
func auditLines(t *testing.T, text string) []auditEntry {
	t.Helper()
	var out []auditEntry
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, `{"time":`) {
			continue
		}
		var e auditEntry
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || e.Event != "tool_call" ||
			e.DurationUS == nil || *e.DurationUS < 0 || e.ScopeViolation == nil {
			t.Fatalf("malformed audit line %q", line)
		}
		out = append(out, e)
	}
	return out
}

// TestAuditLog: over HTTP with --audit-log, one line per call with the
// session, peer, tool, paths (base64 when not UTF-8), outcome, reply size
// and scope_violation, and never a byte of file content.
func TestAuditLog(t *testing.T) {
	root, _ := tree(t)
	const secret = "AUDIT-CANARY-CONTENT-7f3a"
	if err := os.WriteFile(filepath.Join(root, "canary.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "audit.jsonl")
	h := startHTTP(t, root, "--audit-log", logFile)
	s := h.connect("2025-11-25")
	type call struct {
		tool    string
		args    map[string]any
		outcome string
		paths   map[string]string
		scope   bool
	}
	calls := []call{
		{"fs_read", map[string]any{"path": "canary.txt"}, "ok", map[string]string{"path": "canary.txt"}, false},
		{"fs_stat", map[string]any{"path": "/sub/b.txt"}, "ok", map[string]string{"path": "sub/b.txt"}, false},
		{"fs_list", map[string]any{"path": ""}, "ok", map[string]string{"path": ""}, false},
		{"fs_read", map[string]any{"path": "../outside/secret.txt"}, "outside_root", map[string]string{"path": "../outside/secret.txt"}, true},
		{"fs_stat", map[string]any{"path": "missing"}, "not_found", map[string]string{"path": "missing"}, false},
		{"fs_stat", map[string]any{"path_base64": "/2E="}, "not_found", map[string]string{"path_base64": "/2E="}, false},
		{"fs_stat", map[string]any{"path_base64": "aGk="}, "not_found", map[string]string{"path": "hi"}, false},
		{"fs_stat", map[string]any{"path": 7}, "invalid_argument", nil, false},
	}
	var replies []int
	for _, c := range calls {
		res, err := s.session.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, len(res.Content[0].(*mcp.TextContent).Text))
	}
	// The line is written as the call answers; wait for the last.
	var text []byte
	var entries []auditEntry
	waitFor(t, func() bool {
		text, _ = os.ReadFile(logFile)
		entries = auditLines(t, string(text))
		return len(entries) >= len(calls)
	})
	if len(entries) != len(calls) {
		t.Fatalf("%d audit lines for %d calls:\n%s", len(entries), len(calls), text)
	}
	if strings.Contains(string(text), secret) || strings.Contains(string(text), "hello") {
		t.Errorf("the audit log holds file contents:\n%s", text)
	}
	if strings.Contains(h.stderr.String(), `{"time":`) {
		t.Errorf("audit lines on stderr despite --audit-log:\n%s", h.stderr.String())
	}
	for i, c := range calls {
		e := entries[i]
		if e.Tool != c.tool || e.Outcome != c.outcome || *e.ScopeViolation != c.scope || e.ReplyBytes != int64(replies[i]) ||
			e.Session != s.session.ID() || !strings.HasPrefix(e.Peer, "127.0.0.1:") || fmt.Sprint(e.Paths) != fmt.Sprint(c.paths) {
			t.Errorf("call %d %s(%v): audit %+v, want outcome %s paths %v scope %v reply %d session %s",
				i, c.tool, c.args, e, c.outcome, c.paths, c.scope, replies[i], s.session.ID())
		}
	}
	if fi, err := os.Stat(logFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode: %v %v", fi.Mode(), err)
	}
}

// TestAuditStderr: without --audit-log, stdio calls are audited on
// stderr, one line each.
func TestAuditStderr(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	s.wantOK("fs_read", map[string]any{"path": "a.txt"})
	s.wantErr("fs_stat", map[string]any{"path": "link_out/x"}, "outside_root")
	var entries []auditEntry
	waitFor(t, func() bool { entries = auditLines(t, s.stderr.String()); return len(entries) == 2 })
	if e := entries[0]; e.Tool != "fs_read" || e.Outcome != "ok" || e.Session != "stdio" || e.Peer != "" || e.Paths["path"] != "a.txt" {
		t.Errorf("audit %+v", e)
	}
	if e := entries[1]; e.Outcome != "outside_root" || !*e.ScopeViolation {
		t.Errorf("audit %+v", e)
	}
	if strings.Contains(s.stderr.String(), `"hello`) {
		t.Errorf("file contents on stderr:\n%s", s.stderr.String())
	}
}

// BenchmarkHTTPStat measures fs_stat calls per second over Streamable
// HTTP, through the front-end and the confined worker, with 1 and 16
// sessions calling concurrently, at the newest protocol revision (each
// call a self-contained POST) and at 2025-11-25 (Mcp-Session-Id).
func BenchmarkHTTPStat(b *testing.B) {
	base := b.TempDir()
	if err := os.WriteFile(filepath.Join(base, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	h := startHTTP(b, base, "--audit-log", os.DevNull)
	for _, bc := range []struct {
		n        int
		protocol string
	}{{1, "2026-07-28"}, {16, "2026-07-28"}, {1, "2025-11-25"}, {16, "2025-11-25"}} {
		n := bc.n
		b.Run(fmt.Sprintf("sessions=%d/protocol=%s", n, bc.protocol), func(b *testing.B) {
			var sessions []*mcp.ClientSession
			for range n {
				client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
				cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp",
					HTTPClient: &http.Client{Transport: bearer{h.token, http.DefaultTransport}}, MaxRetries: -1},
					&mcp.ClientSessionOptions{ProtocolVersion: bc.protocol})
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				sessions = append(sessions, cs)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for _, cs := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "a.txt"}})
						if err != nil || res.IsError {
							b.Errorf("fs_stat: %v %v", err, res)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// listeningPort returns the port of the one TCP socket process pid
// listens on, waiting for it to appear.
func listeningPort(t *testing.T, pid int) (port int, inode uint64) {
	t.Helper()
	waitFor(t, func() bool { return len(listeningSockets(t, pid)) == 1 })
	inode = listeningSockets(t, pid)[0]
	for _, table := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		for _, line := range strings.Split(string(b), "\n") {
			fl := strings.Fields(line)
			if len(fl) >= 10 && fl[9] == strconv.FormatUint(inode, 10) {
				_, hexPort, _ := strings.Cut(fl[1], ":")
				p, _ := strconv.ParseUint(hexPort, 16, 16)
				return int(p), inode
			}
		}
	}
	t.Fatalf("no port for socket:[%d]", inode)
	return 0, 0
}

// TestSystemdSocketActivate runs fsmcp under systemd-socket-activate,
// systemd's own tool for the activation protocol: it binds, then execs
// fsmcp on the first connection with the socket as descriptor 3.
func TestSystemdSocketActivate(t *testing.T) {
	sa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate not installed (Debian package systemd); TestSocketActivation covers the protocol")
	}
	root, _ := tree(t)
	// systemd-socket-activate wants a fixed port: take a free one. Another
	// process may take it before systemd-socket-activate binds it; then
	// it exits, and the test tries another port.
	var cmd *exec.Cmd
	var addr string
	stderr := &syncBuffer{}
	for attempt := 0; ; attempt++ {
		free, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = free.Addr().String()
		free.Close()
		stderr = &syncBuffer{}
		cmd = exec.Command(sa, "-l", addr, "-E", "FSMCP_TEST_FRONTEND=1", "-E", "PATH="+os.Getenv("PATH"),
			os.Args[0], "--root", root, "--transport", "http", "--listen", "127.0.0.1:0")
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		var bound bool
		waitFor(t, func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			bound = len(listeningSockets(t, cmd.Process.Pid)) == 1
			return bound
		})
		if bound {
			t.Cleanup(func() {
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
				}
			})
			break
		}
		if attempt == 4 {
			t.Fatalf("systemd-socket-activate could not listen on a free port:\n%s", stderr.String())
		}
		t.Logf("systemd-socket-activate exited before listening on %s (taken meanwhile?):\n%s", addr, stderr.String())
	}
	port, inode := listeningPort(t, cmd.Process.Pid)
	if fmt.Sprintf("127.0.0.1:%d", port) != addr {
		t.Fatalf("systemd-socket-activate listens on port %d, want %s", port, addr)
	}
	// The first connection starts fsmcp (same pid, by exec); it waits in
	// the socket's backlog meanwhile.
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("GET /health: %v\nstderr:\n%s", err, stderr.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /health = %d", resp.StatusCode)
	}
	// fsmcp says where it serves before serving, but its stderr reaches
	// the test through a pipe and a copier: wait for the line.
	var m []string
	waitFor(t, func() bool { m = servingLine.FindStringSubmatch(stderr.String()); return m != nil })
	if m[2] != "socket-activated" || m[1] != addr {
		t.Fatalf("not serving the activated socket:\n%s", stderr.String())
	}
	h := &httpServer{t: t, cmd: cmd, base: "http://" + m[1], token: m[3], stderr: stderr}
	h.connect("").wantOK("fs_stat", map[string]any{"path": "a.txt"})
	if l := listeningSockets(t, cmd.Process.Pid); len(l) != 1 || l[0] != inode {
		t.Errorf("fsmcp listens on %v, want only systemd's socket:[%d]", l, inode)
	}
}

// TestSystemdStdioPerConnection runs fsmcp as fsmcp-stdio@.service does:
// systemd-socket-activate --inetd --accept starts one fsmcp per
// connection with the connection as its standard input and output.
func TestSystemdStdioPerConnection(t *testing.T) {
	sa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate not installed (Debian package systemd)")
	}
	root, _ := tree(t)
	sock := filepath.Join(t.TempDir(), "stdio.sock")
	cmd := exec.Command(sa, "--inetd", "--accept", "-l", sock, "-E", "FSMCP_TEST_FRONTEND=1", "-E", "PATH="+os.Getenv("PATH"),
		os.Args[0], "--root", root)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var sessions []*mcp.ClientSession
	for i := range 2 {
		// The socket's file appears at bind, before it listens: until then
		// a connection is refused.
		var conn net.Conn
		waitFor(t, func() bool {
			var err error
			conn, err = net.Dial("unix", sock)
			return err == nil
		})
		client := mcp.NewClient(&mcp.Implementation{Name: "stdio-socket", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
		cancel()
		if err != nil {
			t.Fatalf("connection %d: %v\nstderr:\n%s", i, err, stderr.String())
		}
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	for i, cs := range sessions {
		s := &server{t: t, session: cs, stderr: stderr}
		if r := s.wantOK("fs_read", map[string]any{"path": "a.txt"}); r.str("content") != "hello\n" {
			t.Errorf("connection %d: %s", i, r.text)
		}
	}
	// One fsmcp, each with its own worker, per connection.
	if kids := children(t, cmd.Process.Pid); len(kids) != 2 {
		t.Errorf("%d fsmcp processes for 2 connections", len(kids))
	}
}

// TestHTTPLifecycle: SIGTERM ends an HTTP fsmcp cleanly (exit 0, worker
// gone); a dead worker makes it exit non-zero, which is what
// Restart=on-failure acts on; and a write of several MiB fits in one
// request.
func TestHTTPLifecycle(t *testing.T) {
	root, _ := tree(t)
	h := startHTTP(t, root)
	s := h.connect("2025-11-25") // keeps an event stream open
	big := strings.Repeat("0123456789abcdef", 6<<20/16)
	s.wantOK("fs_write", map[string]any{"path": "big.txt", "content": big, "if_sha256": nil})
	if fi, err := os.Stat(filepath.Join(root, "big.txt")); err != nil || fi.Size() != int64(len(big)) {
		t.Fatalf("big.txt: %v %v", fi, err)
	}
	workers := children(t, h.cmd.Process.Pid)
	h.cmd.Process.Signal(syscall.SIGTERM)
	code := h.waitExit()
	if code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", code, h.stderr.String())
	}
	for _, w := range workers {
		if err := syscall.Kill(w, 0); err == nil {
			t.Errorf("worker %d outlived the front-end", w)
		}
	}

	h = startHTTP(t, root)
	h.connect("2025-11-25").wantOK("fs_stat", map[string]any{"path": "a.txt"})
	for _, w := range children(t, h.cmd.Process.Pid) {
		syscall.Kill(w, syscall.SIGKILL)
	}
	if code := h.waitExit(); code == 0 {
		t.Errorf("exit 0 after the worker died\n%s", h.stderr.String())
	}
	if !strings.Contains(h.stderr.String(), "worker exited unexpectedly") {
		t.Errorf("no reason given:\n%s", h.stderr.String())
	}
}

// waitExit waits for the process to exit and returns its exit code.
func (h *httpServer) waitExit() int {
	h.t.Helper()
	select {
	case <-h.exited:
		return h.cmd.ProcessState.ExitCode()
	case <-time.After(15 * time.Second):
		h.t.Fatal("fsmcp did not exit within 15s")
		return -1
	}
}

// TestHTTPStartupRefusals: what fsmcp must obtain before confining itself
// and cannot is a start-up error, not a later surprise.
func TestHTTPStartupRefusals(t *testing.T) {
	root, _ := tree(t)
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--audit-log", filepath.Join(root, "no", "such", "dir", "audit")}, "--audit-log"},
		{[]string{"--transport", "http", "--listen", "127.0.0.1:0", "--token-file", short}, "at least 16"},
		{[]string{"--transport", "http", "--listen", "127.0.0.1:0", "--token-file", filepath.Join(root, "missing")}, "--token-file"},
		{[]string{"--transport", "http", "--listen", busy.Addr().String()}, "address already in use"},
		{[]string{"--transport", "http", "--allow-origin", "evil.example"}, "not an origin"},
		{[]string{"--transport", "sse"}, "want stdio or http"},
	} {
		cmd := fsmcpCommand(root, c.flags...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: exit %d, want an error about %q\n%s", c.flags, code, c.want, out)
		}
	}
}
