package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsmcp/fsmcp/frontend"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// Test hooks, compiled only into the test binary. A fs_stat whose path
// starts with hookPrefix runs the named action inside the real process
// (front-end or confined worker) and reports the outcome in the reply, so
// a test can show which layer refuses what.
const hookPrefix = "fsmcp-test-hook:"

// hookResult runs action, which may bypass os.Root on purpose, and returns
// "ok" or the error's text.
func hookResult(action, arg string) string {
	var err error
	switch action {
	case "panic":
		panic("test hook panic")
	case "open":
		var f *os.File
		if f, err = os.Open(arg); err == nil {
			f.Close()
		}
	case "write":
		err = os.WriteFile(arg, []byte("written by a test hook\n"), 0o644)
	case "sleep":
		select {} // block until the process is killed
	case "rg":
		// Runs the worker's rg on arg, an absolute host path, from
		// inside the worker's Landlock domain, bypassing os.Root.
		// Its stdin is a pipe: the confined worker cannot open /dev/null.
		cmd := exec.Command(workerRG(), "--no-config", "--no-ignore", "--hidden", "--regexp=.", "--", arg)
		cmd.Stdin = strings.NewReader("")
		out, rerr := cmd.CombinedOutput()
		return fmt.Sprintf("rg: %v: %s", rerr, out)
	case "rgtime":
		// Times the worker's rg, inside its domain, run in the directory
		// and with the arguments arg holds one a line; the output is
		// read and discarded.
		fields := strings.Split(arg, "\n")
		cmd := exec.Command(workerRG(), fields[1:]...)
		cmd.Dir = fields[0]
		cmd.Stdin = strings.NewReader("")
		begin := time.Now()
		out, rerr := cmd.Output()
		return fmt.Sprintf("rgtime %d %d %v", time.Since(begin).Nanoseconds(), len(out), rerr)
	case "connect", "connect-mptcp":
		// Plain TCP is what Landlock's network rules cover; MPTCP
		// (Go's default for net.Listen since 1.24) is not.
		d := net.Dialer{Timeout: 5 * time.Second}
		d.SetMultipathTCP(action == "connect-mptcp")
		var c net.Conn
		if c, err = d.Dial("tcp", arg); err == nil {
			c.Close()
		}
	case "connect-udp":
		var c net.Conn
		if c, err = net.Dial("udp", arg); err == nil {
			_, err = c.Write([]byte("x"))
			c.Close()
		}
	case "listen", "listen-mptcp":
		var lc net.ListenConfig
		lc.SetMultipathTCP(action == "listen-mptcp")
		var l net.Listener
		if l, err = lc.Listen(context.Background(), "tcp", arg); err == nil {
			l.Close()
		}
	case "dirflags":
		// What the worker asks of a directory to tell whether it folds
		// case (worker/fold.go): fstatfs and FS_IOC_GETFLAGS.
		var f *os.File
		if f, err = os.Open(arg); err == nil {
			var st unix.Statfs_t
			if err = unix.Fstatfs(int(f.Fd()), &st); err == nil {
				_, err = unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
			}
			f.Close()
		}
	default:
		var known bool
		if known, err = escapeHook(action, arg); !known {
			return "unknown hook " + action
		}
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// workerRG is the rg named on the worker's command line.
func workerRG() string {
	for _, a := range os.Args {
		if v, ok := strings.CutPrefix(a, "--rg="); ok {
			return v
		}
	}
	return "rg"
}

func parseHook(path []byte) (action, arg string, ok bool) {
	rest, ok := strings.CutPrefix(string(path), hookPrefix)
	if !ok {
		return "", "", false
	}
	action, arg, _ = strings.Cut(rest, ":")
	return action, arg, true
}

// selftestInside, a file in the root, makes the worker's self-test open
// it in place of the directory outside the root: the kernel allows that,
// and start-up must fail.
const selftestInside = "fsmcp-test-selftest-opens-this"

func workerHooks() worker.Hooks {
	return worker.Hooks{
		SelftestOutside: func(root, outside string) string {
			if p := filepath.Join(root, selftestInside); fileExists(p) {
				return p
			}
			return outside
		},
		Interceptor: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if sr, ok := req.(*fsmcpv1.StatRequest); ok {
				action, arg, ok := parseHook(sr.GetPath())
				if ok && action == "wait-cancel" {
					// Blocks until the RPC's context ends, then records
					// why in the file arg (inside the writable root).
					<-ctx.Done()
					_ = os.WriteFile(arg, []byte(ctx.Err().Error()), 0o644)
					return nil, ctx.Err()
				}
				if ok && !strings.HasPrefix(action, "frontend-") {
					return nil, &worker.Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, Message: "worker hook: " + hookResult(action, arg)}
				}
			}
			return h(ctx, req)
		},
	}
}

func frontendHooks() frontend.Hooks {
	return frontend.Hooks{
		WrapTool: func(name string, h mcp.ToolHandler) mcp.ToolHandler {
			if name != "fs_stat" {
				return h
			}
			return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var args struct{ Path string }
				_ = json.Unmarshal(req.Params.Arguments, &args)
				if action, arg, ok := parseHook([]byte(args.Path)); ok && strings.HasPrefix(action, "frontend-") {
					msg := "frontend hook: " + hookResult(strings.TrimPrefix(action, "frontend-"), arg)
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
						Text: fmt.Sprintf(`{"ok":false,"error":{"code":"internal","message":%q}}`, msg)}}}, nil
				}
				return h(ctx, req)
			}
		},
	}
}
