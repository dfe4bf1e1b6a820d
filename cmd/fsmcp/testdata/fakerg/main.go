// Command fakerg stands in for rg in the seccomp tests: started by the
// confined worker exactly as rg is, it tries what a compromised rg would
// try and writes down how each attempt ended.
//
// With --version it prints a ripgrep version line, as the worker's
// start-up check expects. Run any other way (as fs_grep runs rg), it reads
// escape.json from its working directory (the searched directory inside
// the root), tries each escape, writes escape-results.json beside it, and
// exits 1, which rg means as "no match".
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// targets are the things outside the root to attack, from escape.json.
type targets struct {
	Outside  string `json:"outside"`  // a regular file outside the root
	Sock     string `json:"sock"`     // a listening pathname unix socket outside the root
	UDP      string `json:"udp"`      // a UDP address that counts what it receives
	Frontend int    `json:"frontend"` // the front-end's pid
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("ripgrep 13.0.0 (fsmcp escape probe)")
		return
	}
	b, err := os.ReadFile("escape.json")
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakerg: %v\n", err)
		os.Exit(2)
	}
	var t targets
	if err := json.Unmarshal(b, &t); err != nil {
		fmt.Fprintf(os.Stderr, "fakerg: %v\n", err)
		os.Exit(2)
	}
	past := time.Unix(1, 0)
	results := map[string]string{
		"mptcp-listen":    outcome(mptcpListen()),
		"udp-send":        outcome(udpSend(t.UDP)),
		"unix-connect":    outcome(unixConnect(t.Sock)),
		"chmod":           outcome(os.Chmod(t.Outside, 0o777)),
		"chown":           outcome(os.Chown(t.Outside, 12345, 12345)),
		"setxattr":        outcome(unix.Setxattr(t.Outside, "user.planted", []byte("x"), 0)),
		"removexattr":     outcome(unix.Removexattr(t.Outside, "user.keep")),
		"utimes":          outcome(os.Chtimes(t.Outside, past, past)),
		"ptrace-worker":   outcome(ptrace(os.Getppid())),
		"ptrace-frontend": outcome(ptrace(t.Frontend)),
		"exec-sh":         outcome(execSh()),
		"open-outside":    outcome(openOutside(t.Outside)),
	}
	out, _ := json.Marshal(results)
	if err := os.WriteFile("escape-results.json", out, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "fakerg: %v\n", err)
		os.Exit(2)
	}
	os.Exit(1)
}

func outcome(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// mptcpListen listens on MPTCP without Go's fallback to plain TCP:
// Landlock's network rules cover only TCP.
func mptcpListen() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return nil
}

func udpSend(addr string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("escaped"))
	return err
}

func unixConnect(path string) error {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return err
	}
	c.Write([]byte("escaped"))
	return c.Close()
}

// ptrace attaches to pid and, should that work, lets it go again at once.
func ptrace(pid int) error {
	if err := unix.PtraceAttach(pid); err != nil {
		return fmt.Errorf("ptrace attach: %w", err)
	}
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, unix.WALL, nil)
	unix.PtraceDetach(pid)
	return nil
}

func execSh() error {
	// Pipes, not /dev/null, which the confined process cannot open: what
	// is refused must be the exec itself.
	cmd := exec.Command("/bin/sh", "-c", "true")
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run()
}

func openOutside(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}
