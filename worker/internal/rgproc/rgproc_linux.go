package rgproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/fsmcp/fsmcp/worker/internal/rglog"
)

// stderrKeep is how much of rg's stderr is kept to explain a failure.
const stderrKeep = 8 << 10

// Cmd is one rg run.
type Cmd struct {
	Path string
	Args []string
	// Stdin is rg's stdin (a confined worker cannot open /dev/null
	// itself, and os/exec would try); nil leaves it unset.
	Stdin *os.File
	// Dir is the directory rg runs in; File, when set, is inherited as
	// fd 3.
	Dir, File *os.File
	// Debug, when set, receives each line rg writes to stderr that
	// starts with "DEBUG|" (rg --debug); the others are rg's errors.
	Debug func(line []byte)
	// Consume reads rg's stdout to its end.
	Consume func(io.Reader) error
	// Tick is called every Every while rg runs.
	Tick  func() error
	Every time.Duration
}

// Result is how rg ended: its exit status, the first bytes it wrote to
// stderr, and the count of all its stderr lines.
type Result struct {
	Exit        int
	Stderr      []byte
	StderrLines int64
}

// Run's failures besides the context's: rg could not start, Tick or
// Consume failed (rg was killed), or rg ended other than by exiting.
type (
	StartError   struct{ Err error }
	TickError    struct{ Err error }
	ConsumeError struct{ Err error }
	WaitError    struct{ Err error }
)

func (e *StartError) Error() string   { return "start rg: " + e.Err.Error() }
func (e *StartError) Unwrap() error   { return e.Err }
func (e *TickError) Error() string    { return e.Err.Error() }
func (e *TickError) Unwrap() error    { return e.Err }
func (e *ConsumeError) Error() string { return "reading rg's output: " + e.Err.Error() }
func (e *WaitError) Error() string    { return "rg: " + e.Err.Error() }

// Run runs c. When ctx ends, or Consume or Tick fails, rg's whole process
// group is killed; Run returns only after rg has been reaped. A context
// that ended is returned as its error, before any other.
func Run(ctx context.Context, c Cmd) (Result, error) {
	// Everything that starts, signals and reaps rg happens on this one
	// OS thread. Landlock below ABI 8 gives each thread of the worker a
	// domain of its own, and a scoped domain may signal only inside
	// itself: rg inherits the domain of the thread that forked it, so
	// only that thread may kill it. Pdeathsig, too, follows the thread
	// that forked the child, not the process.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	cmd := exec.Command(c.Path, c.Args...)
	// rg reads RIPGREP_CONFIG_PATH, HOME and XDG_CONFIG_HOME from its
	// environment: give it none at all.
	cmd.Env = []string{}
	// Given no path, rg would search stdin; it always gets a path, and
	// /dev/null besides.
	if c.Stdin != nil {
		cmd.Stdin = c.Stdin
	}
	// The working directory is the descriptor opened through the Root,
	// so rg's "." is exactly that directory, with no path string between.
	cmd.Dir = fmt.Sprintf("/proc/self/fd/%d", c.Dir.Fd())
	if c.File != nil {
		cmd.ExtraFiles = []*os.File{c.File}
	}
	// Its own process group, so that a kill reaches anything rg might
	// start; SIGKILL should the worker die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr := &stderrBuffer{}
	cmd.Stderr = stderr
	if c.Debug != nil {
		cmd.Stderr = &rglog.Splitter{Debug: c.Debug, Rest: stderr}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	if err := cmd.Start(); err != nil {
		return Result{}, &StartError{err}
	}
	killed := false
	kill := func() {
		if killed {
			return
		}
		killed = true
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			fmt.Fprintf(os.Stderr, "BUG(fsmcp): kill rg: %v\n", err)
		}
	}
	failed := make(chan struct{}, 1)
	consumed := make(chan error, 1)
	go func() {
		err := c.Consume(stdout)
		if err != nil {
			failed <- struct{}{}
		}
		// Drain what is left so rg is never blocked on a full pipe.
		io.Copy(io.Discard, stdout)
		consumed <- err
	}()
	tick := time.NewTicker(c.Every)
	defer tick.Stop()
	var consumeErr, tickErr, waitErr error
	waited := make(chan error, 1)
	running, ctxDone := true, ctx.Done()
	for reaped := false; !reaped; {
		select {
		case consumeErr = <-consumed:
			// Wait only once stdout is read to its end, as os/exec asks.
			running = false
			go func() { waited <- cmd.Wait() }()
		case waitErr = <-waited:
			reaped = true
		case <-ctxDone:
			ctxDone = nil
			kill()
		case <-failed:
			kill()
		case <-tick.C:
			if running && tickErr == nil {
				if tickErr = c.Tick(); tickErr != nil {
					kill()
				}
			}
		}
	}
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case tickErr != nil:
		return Result{}, &TickError{tickErr}
	case consumeErr != nil:
		return Result{}, &ConsumeError{consumeErr}
	}
	res := Result{Stderr: stderr.b, StderrLines: stderr.lines}
	var exit *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exit) && exit.ExitCode() >= 0:
		res.Exit = exit.ExitCode()
	default:
		return Result{}, &WaitError{waitErr}
	}
	return res, nil
}

// stderrBuffer keeps the first stderrKeep bytes written and counts lines.
type stderrBuffer struct {
	mu    sync.Mutex
	b     []byte
	lines int64
}

func (w *stderrBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := stderrKeep - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	w.lines += int64(bytes.Count(p, []byte("\n")))
	return len(p), nil
}
