package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A panic in a handler, on either side, is answered with internal and the
// server carries on.
func TestPanicAnsweredWithInternal(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, action := range []string{"panic", "frontend-panic"} {
		r := s.wantErr("fs_stat", map[string]any{"path": hookPrefix + action + ":"}, "internal")
		if strings.Contains(r.text, "test hook panic") {
			t.Errorf("%s: the panic value reached the client: %s", action, r.text)
		}
		s.wantOK("fs_stat", map[string]any{"path": "a.txt"})
	}
	if !strings.Contains(s.stderr.String(), "panic") {
		t.Errorf("no panic logged on stderr")
	}
}

// kill -9 of the worker mid-call: that call gets unavailable, and the
// front-end exits non-zero promptly with one clear line.
func TestWorkerKilledMidCall(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	wpid := s.workerPid()
	done := make(chan reply, 1)
	go func() { done <- s.call("fs_stat", map[string]any{"path": hookPrefix + "sleep:"}) }()
	// Wait until the call is inside the worker: its handler goroutine is
	// blocked, so give the request time to arrive, then kill.
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(wpid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code() != "unavailable" {
			t.Fatalf("call in flight = %s, want unavailable", r.text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight was not answered")
	}
	if code := s.wait(5 * time.Second); code == 0 {
		t.Fatal("front-end exited 0 after its worker died")
	}
	if !strings.Contains(s.stderr.String(), "worker exited unexpectedly") {
		t.Errorf("stderr does not say the worker died:\n%s", s.stderr.String())
	}
}

// kill -9 of the front-end takes the worker down within a second.
func TestFrontendKilledTakesWorkerDown(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	wpid := s.workerPid()
	s.cmd.Process.Kill()
	s.wait(5 * time.Second)
	waitGone(t, wpid, time.Second)
}

// SIGTERM, SIGINT and stdin EOF shut both processes down cleanly: exit 0,
// the worker reaped, no orphan.
func TestCleanShutdown(t *testing.T) {
	for _, how := range []string{"SIGTERM", "SIGINT", "EOF"} {
		t.Run(how, func(t *testing.T) {
			root, _ := tree(t)
			s := start(t, root)
			s.wantOK("fs_stat", map[string]any{"path": "a.txt"})
			wpid := s.workerPid()
			switch how {
			case "SIGTERM":
				s.cmd.Process.Signal(syscall.SIGTERM)
			case "SIGINT":
				s.cmd.Process.Signal(syscall.SIGINT)
			case "EOF":
				s.stdin.Close()
			}
			if code := s.wait(10 * time.Second); code != 0 {
				t.Fatalf("exit code %d after %s\nstderr:\n%s", code, how, s.stderr.String())
			}
			// The front-end reaped its worker before exiting: the pid is
			// not even a zombie.
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", wpid)); err == nil && !gone(wpid) {
				t.Fatalf("worker %d outlived the front-end", wpid)
			}
		})
	}
}

// Start-up refusals: non-zero exit, one clear line on stderr, nothing on
// stdout (which carries only MCP).
func TestStartupRefusals(t *testing.T) {
	root, _ := tree(t)
	file := filepath.Join(root, "a.txt")
	noRG := t.TempDir() // a PATH without rg
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no root", []string{}, nil, "--root is required"},
		{"missing root", []string{"--root", filepath.Join(root, "nope")}, nil, "no such file"},
		{"root is a file", []string{"--root", file}, nil, "not a directory"},
		{"no rg on PATH", []string{"--root", root}, []string{"PATH=" + noRG}, "ripgrep not found"},
		{"bad --rg", []string{"--root", root, "--rg", "/nonexistent/rg"}, nil, "ripgrep not found"},
		{"tiny reply bound", []string{"--root", root, "--max-response-bytes", "10"}, nil, "--max-response-bytes"},
		{"bad transport", []string{"--root", root, "--transport", "carrier-pigeon"}, nil, "--transport"},
		{"no calls", []string{"--root", root, "--max-calls", "0"}, nil, "--max-calls must be between 1 and 256"},
		{"too many calls", []string{"--root", root, "--max-calls", "257"}, nil, "--max-calls must be between 1 and 256"},
		{"session above server", []string{"--root", root, "--max-calls", "4", "--max-session-calls", "5"}, nil, "--max-session-calls must be between 1 and --max-calls (4)"},
		{"unknown flag", []string{"--root", root, "--follow-symlinks"}, nil, "flag provided but not defined"},
		{"stray argument", []string{"--root", root, "extra"}, nil, "unexpected argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := fsmcpCommand("", c.args...)
			cmd.Args = append([]string{cmd.Args[0]}, c.args...)
			cmd.Env = append(cmd.Env, c.env...)
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err == nil || cmd.ProcessState.ExitCode() == 0 {
				t.Fatalf("fsmcp %v started; want a refusal", c.args)
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr = %q, want it to say %q", stderr.String(), c.want)
			}
			if stdout.String() != "" {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
			noHostPath(t, stdout.String(), root)
		})
	}
}
