package frontend

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// ExecCommand is the first argument that makes fsmcp run one command from
// a shell (ExecMain) instead of serving MCP.
const ExecCommand = "exec"

// Exit codes of `fsmcp exec` besides the command's own status.
const (
	// execUsage: the arguments are wrong.
	execUsage = 2
	// execRefused: the server did not start, or fs_exec refused the call.
	execRefused = 125
	// execTimedOut: the command ran past its timeout (timeout(1)'s code).
	execTimedOut = 124
)

// ExecMain runs `fsmcp exec [server flags] -- ARGV`: one fs_exec call
// through the real server, started with the server flags in this process
// and reached by go-sdk's client over pipes, so the command runs in
// exactly the confinement fs_exec gives it (this process is confined as
// the front-end is). It prints the command's stdout and stderr and
// returns its exit status, 128+N for a signal N, execTimedOut for a
// timeout, or execRefused when fs_exec failed. The call asks for the
// --exec-max-timeout and 1 MiB of each stream, in the root's top.
func ExecMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	dash := slices.Index(args, "--")
	if dash < 0 || dash == len(args)-1 {
		fmt.Fprintln(stderr, "usage: fsmcp exec --root DIR --exec PROGRAM [server flags] -- ARGV")
		return execUsage
	}
	flags, argv := args[:dash], args[dash+1:]
	cfg, _, err := parseFlags(flags, io.Discard)
	if err != nil {
		fmt.Fprintf(stderr, "fsmcp exec: %v (see fsmcp --help)\n", err)
		return execUsage
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	// The server's stderr (its start line, the audit log, what its
	// processes say) is shown only when it fails. Several goroutines
	// write it: the processes' copiers, the audit log, the server.
	var serverErr lockedBuffer
	served := make(chan int, 1)
	go func() {
		code := Main(ctx, flags, inR, outW, &serverErr, Hooks{})
		// A server that stopped early fails the client's reads and
		// writes instead of leaving them blocked.
		outW.Close()
		inR.Close()
		served <- code
	}()
	code, err := execCall(ctx, outR, inW, cfg.ToolsPrefix+execToolName, argv, cfg.Exec.MaxTimeoutS, stdout, stderr)
	inW.Close()
	if c := <-served; err != nil {
		if c != 0 {
			serverErr.writeTo(stderr)
		}
		fmt.Fprintf(stderr, "fsmcp exec: %v\n", err)
		return execRefused
	}
	return code
}

// execCall connects to the server on r and w and makes the fs_exec call.
func execCall(ctx context.Context, r io.ReadCloser, w io.WriteCloser, tool string, argv []string, timeoutS int64,
	stdout, stderr io.Writer) (int, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-exec", Version: Version}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, nil)
	if err != nil {
		return 0, fmt.Errorf("the server did not start: %w", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{
		"argv": argv, "timeout_s": timeoutS, "max_bytes": execMaxBytes,
	}})
	if err != nil {
		return 0, err
	}
	if len(res.Content) == 0 {
		return 0, errors.New("fs_exec replied with no content")
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return 0, errors.New("fs_exec replied with no text")
	}
	if res.IsError {
		return 0, fmt.Errorf("fs_exec: %s", text.Text)
	}
	var doc struct {
		Exit            *int   `json:"exit"`
		Signal          string `json:"signal"`
		TimedOut        bool   `json:"timed_out"`
		Stdout          string `json:"stdout"`
		StdoutEncoding  string `json:"stdout_encoding"`
		StdoutTruncated bool   `json:"stdout_truncated"`
		Stderr          string `json:"stderr"`
		StderrEncoding  string `json:"stderr_encoding"`
		StderrTruncated bool   `json:"stderr_truncated"`
	}
	if err := json.Unmarshal([]byte(text.Text), &doc); err != nil {
		return 0, fmt.Errorf("fs_exec's reply: %w", err)
	}
	for _, s := range []struct {
		w         io.Writer
		data, enc string
		truncated bool
		name      string
	}{
		{stdout, doc.Stdout, doc.StdoutEncoding, doc.StdoutTruncated, "stdout"},
		{stderr, doc.Stderr, doc.StderrEncoding, doc.StderrTruncated, "stderr"},
	} {
		b := []byte(s.data)
		if s.enc == "base64" {
			if b, err = base64.StdEncoding.DecodeString(s.data); err != nil {
				return 0, fmt.Errorf("fs_exec's %s: %w", s.name, err)
			}
		}
		s.w.Write(b)
		if s.truncated {
			fmt.Fprintf(stderr, "fsmcp exec: the command's %s was cut short\n", s.name)
		}
	}
	switch {
	case doc.TimedOut:
		fmt.Fprintf(stderr, "fsmcp exec: the command ran past %d s and was killed\n", timeoutS)
		return execTimedOut, nil
	case doc.Exit != nil:
		return *doc.Exit, nil
	}
	if n := unix.SignalNum(doc.Signal); n != 0 {
		return 128 + int(n), nil
	}
	return 0, fmt.Errorf("the command ended by %s", strconv.Quote(doc.Signal))
}

// lockedBuffer is a bytes.Buffer that goroutines may write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) writeTo(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.Write(l.b.Bytes())
}
