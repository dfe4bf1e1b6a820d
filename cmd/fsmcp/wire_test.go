package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const wireInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
`

// wireReplies parses stdout into replies by id.
func wireReplies(t *testing.T, out []byte) map[string][]map[string]any {
	t.Helper()
	got := map[string][]map[string]any{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q", line)
		}
		id, _ := json.Marshal(m["id"])
		got[string(id)] = append(got[string(id)], m)
	}
	return got
}

func wireToolText(m map[string]any) string {
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		return fmt.Sprint(m)
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// A client that writes its requests and closes stdin gets every answer,
// a long grep's included, and the server exits 0.
func TestWireStdinClosedAnswersEverything(t *testing.T) {
	root := slowTree(t, 1, 2)
	script := wireInit +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs_grep","arguments":{"path":"","pattern":"\\w+e\\b"}}}` + "\n" +
		`not json` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":""}}}`
	cmd := fsmcpCommand(root)
	cmd.Stdin = strings.NewReader(script)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	begin := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fsmcp: %v\n%s", err, stderr.String())
	}
	got := wireReplies(t, out)
	for _, id := range []string{"1", "2", "3", "4", "null"} {
		if len(got[id]) != 1 {
			t.Errorf("id %s: %d replies, want 1 (stdout %.300s)", id, len(got[id]), out)
		}
	}
	if txt := wireToolText(got["3"][0]); !strings.HasPrefix(txt, `{"ok":true`) {
		t.Errorf("grep in flight at EOF: %.300s", txt)
	}
	if txt := wireToolText(got["4"][0]); !strings.HasPrefix(txt, `{"ok":true`) {
		t.Errorf("stat: %.300s", txt)
	}
	if e, _ := got["null"][0]["error"].(map[string]any); e["code"] != -32700.0 {
		t.Errorf("garbage line: %v", got["null"])
	}
	t.Logf("session of a grep in flight at EOF took %v", time.Since(begin))
}

// A call blocked past the grace after EOF is answered unavailable, and
// the server still exits.
func TestWireStdinClosedCallBlocked(t *testing.T) {
	root, _ := tree(t)
	script := wireInit + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"` + hookPrefix + `sleep:"}}}` + "\n"
	cmd := fsmcpCommand(root)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fsmcp: %v", err)
	}
	got := wireReplies(t, out)
	if len(got["2"]) != 1 || !strings.Contains(wireToolText(got["2"][0]), `"code":"unavailable"`) {
		t.Fatalf("blocked call at EOF: %s", out)
	}
}

// Killing the worker while calls are being read, decoded and run: every
// call read gets exactly one reply, ok or unavailable.
func TestWireWorkerDeathAnswersEveryCall(t *testing.T) {
	root, _ := tree(t)
	s := spawn(t, root)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(s.stdin, wireInit)
	r := bufio.NewReader(stdout)
	if _, err := r.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	const n = 200
	go func() {
		for i := range n {
			if i == n/2 {
				syscall.Kill(s.workerPid(), syscall.SIGKILL)
			}
			fmt.Fprintf(s.stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"sub"}}}`+"\n", 100+i)
		}
	}()
	rest, _ := io.ReadAll(r)
	got := wireReplies(t, rest)
	first := -1
	for i := range n {
		id := fmt.Sprint(100 + i)
		rs := got[id]
		if len(rs) > 1 {
			t.Errorf("id %s: %d replies", id, len(rs))
		}
		if len(rs) == 0 {
			if first < 0 {
				first = i
			}
			continue
		}
		if first >= 0 {
			t.Errorf("id %s answered after id %d was not", id, 100+first)
		}
		txt := wireToolText(rs[0])
		if !strings.HasPrefix(txt, `{"ok":true`) && !strings.Contains(txt, `"code":"unavailable"`) {
			t.Errorf("id %s: %.200s", id, txt)
		}
	}
	// Calls the front-end never read (it exited first) have no reply;
	// every call it read has one.
	t.Logf("%d of %d calls answered before the front-end exited", n-max(first, 0), n)
}

// An audit log nobody drains never delays a reply: lines beyond the
// queue are dropped and counted, and every call is either logged or
// counted.
func TestWireAuditNeverBlocks(t *testing.T) {
	root, _ := tree(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := fsmcpCommand(root)
	cmd.Stderr = pw
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	const calls, workers = 5000, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls / workers {
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "sub"}})
				if err != nil || res.IsError {
					errs <- fmt.Errorf("worker %d: %v %v", w, err, res)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Now drain stderr: the queued lines, then the count of the rest.
	var logged, dropped int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e struct {
				Event string
				Count int64
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			switch e.Event {
			case "tool_call":
				logged++
			case "audit_dropped":
				dropped += e.Count
			}
		}
	}()
	session.Close()
	<-done
	if logged+dropped != calls || dropped == 0 {
		t.Fatalf("%d calls logged, %d counted dropped; want %d in all, some dropped", logged, dropped, calls)
	}
	t.Logf("undrained stderr: %d lines logged, %d dropped and counted", logged, dropped)
}

// Arguments too large for their tool are refused as the line is read,
// before go-sdk copies and decodes them; the session goes on.
func TestWireLargeArgumentsRefusedEarly(t *testing.T) {
	root, _ := tree(t)
	s := spawn(t, root)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReaderSize(stdout, 1<<20)
	io.WriteString(s.stdin, wireInit)
	if _, err := r.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	go func() {
		fmt.Fprintf(s.stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"%s"}}}`+"\n", strings.Repeat("a", size))
		io.WriteString(s.stdin, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs_stat","arguments":{"path":"sub"}}}`+"\n")
	}()
	for _, want := range []string{`"code":"invalid_argument","message":"arguments of 8388619 bytes exceed the 1048576 this tool accepts"`, `{"ok":true`} {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		got := wireReplies(t, line)
		var m map[string]any
		for _, rs := range got {
			m = rs[0]
		}
		if txt := wireToolText(m); !strings.Contains(txt, want) {
			t.Fatalf("reply %.300s, want %s", txt, want)
		}
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM") {
			t.Logf("front-end after a %d MiB line: %s", size>>20, strings.Join(strings.Fields(l), " "))
		}
	}
}
