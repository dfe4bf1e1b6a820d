package main

// rg under the worker's confinement, as a baseline: a child of this
// benchmark confines itself with exactly the calls the worker makes
// (sandbox.ConfineWorker on the root, read only, with rg and its
// libraries; then sandbox.FilterWorker) and runs rg on request, as the
// worker runs it (from a locked thread, in its own process group, with an
// empty environment and /dev/null as stdin, stdout read to its end). What
// it times is rg's own cost inside the Landlock domain and seccomp filter,
// before fsmcp adds anything.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

// confinedSubcommand makes the benchmark binary the confined rg runner.
const confinedSubcommand = "__confined-rg"

// confinedMain confines this process to root and then, for each line of
// stdin (a JSON array of rg's arguments), runs rg in root and answers
// "NS EXIT": rg's time from start to reaping, and its exit status.
func confinedMain(rg, root string) error {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	fdPath := fmt.Sprintf("/proc/self/fd/%d", rootFD)
	// The directory rg runs in, opened as the worker opens a search's.
	dir, err := os.Open(fdPath)
	if err != nil {
		return err
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	files, err := sandbox.ExecDeps(rg)
	if err != nil {
		return err
	}
	if _, err := sandbox.ConfineWorker(fdPath, true, files); err != nil {
		return err
	}
	unix.Close(rootFD)
	if _, err := sandbox.FilterWorker(); err != nil {
		return err
	}
	runtime.LockOSThread()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var args []string
		if err := json.Unmarshal(in.Bytes(), &args); err != nil {
			return err
		}
		cmd := exec.Command(rg, args...)
		cmd.Env = []string{}
		cmd.Stdin = devNull
		// rg's stderr is read, as the worker reads it (a confined
		// process cannot open /dev/null for it).
		cmd.Stderr = io.Discard
		cmd.Dir = fmt.Sprintf("/proc/self/fd/%d", dir.Fd())
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		t0 := time.Now()
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		io.Copy(io.Discard, out)
		err = cmd.Wait()
		d := time.Since(t0)
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			return err
		}
		fmt.Printf("%d %d\n", d.Nanoseconds(), code)
	}
	return in.Err()
}

// confinedRG is a running confined rg runner.
type confinedRG struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startConfinedRG(root string) (*confinedRG, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	rg, err := exec.LookPath("rg")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, confinedSubcommand, rg, root)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &confinedRG{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// run runs rg with args in the root and returns the runner's time for it.
func (c *confinedRG) run(args []string) (time.Duration, error) {
	b, _ := json.Marshal(args)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return 0, err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("confined rg runner: %w", err)
	}
	var ns int64
	var code int
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d %d", &ns, &code); err != nil {
		return 0, fmt.Errorf("confined rg runner: %q", line)
	}
	if code > 1 {
		return 0, fmt.Errorf("confined rg %q: exit status %d", args, code)
	}
	return time.Duration(ns), nil
}

func (c *confinedRG) close() {
	c.in.Close()
	c.cmd.Wait()
}
