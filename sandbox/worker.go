//go:build linux

package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// WorkerSubcommand is the hidden first argument that makes the fsmcp binary
// run as the worker. It is dispatched before any flag parsing.
const WorkerSubcommand = "__worker"

// WorkerConfig is everything the worker learns from its trusted parent. It
// travels in argv, never over the RPC socket, so a compromised front-end
// session cannot widen it after start-up.
type WorkerConfig struct {
	// SockFD is the worker's end of the socketpair.
	SockFD int
	// Root is the directory to serve, as given on the command line.
	Root string
	// RG is the absolute path of the ripgrep binary.
	RG string
	// ReadOnly makes the worker's Landlock ruleset grant no write right.
	ReadOnly bool
	// AllowNoLandlock lets the worker run on a kernel without Landlock.
	AllowNoLandlock bool
	// MaxRead bounds the bytes one read returns.
	MaxRead int64
	// MaxMedia bounds the file fs_view sends (--max-media-bytes).
	MaxMedia int64
	// Policy is the operator's protected and denied paths, defaults
	// included.
	Policy Policy
	// MaxFileBytes, MemoryBytes, MaxRG, MaxHeavy and QueueTimeout are the
	// worker's budgets (worker.Limits); zero means the worker's default.
	MaxFileBytes int64
	MemoryBytes  int64
	MaxRG        int
	MaxHeavy     int
	QueueTimeout time.Duration
	// Quarantine, when set, is the directory outside the root where
	// deletes and writes put what they remove or replace, bounded by
	// QuarantineBytes.
	Quarantine      string
	QuarantineBytes int64
	// Rules, when set, is the --rules file (an absolute path).
	Rules string
	// StateDir, when set, is the root's state directory (outside the
	// root), which holds fs_patch's journals; DiscardJournal names a
	// journal there to set aside instead of refusing to start.
	StateDir       string
	DiscardJournal string
	// Verbose has the worker say on stderr how it confined itself.
	Verbose bool
}

func (c WorkerConfig) argv() []string {
	args := []string{
		WorkerSubcommand,
		"--sock-fd=" + strconv.Itoa(c.SockFD),
		"--root=" + c.Root,
		"--rg=" + c.RG,
		"--read-only=" + strconv.FormatBool(c.ReadOnly),
		"--allow-no-landlock=" + strconv.FormatBool(c.AllowNoLandlock),
		"--max-read=" + strconv.FormatInt(c.MaxRead, 10),
		"--max-media=" + strconv.FormatInt(c.MaxMedia, 10),
		"--max-file-bytes=" + strconv.FormatInt(c.MaxFileBytes, 10),
		"--memory-bytes=" + strconv.FormatInt(c.MemoryBytes, 10),
		"--max-rg=" + strconv.Itoa(c.MaxRG),
		"--max-heavy=" + strconv.Itoa(c.MaxHeavy),
		"--queue-timeout=" + c.QueueTimeout.String(),
		"--quarantine=" + c.Quarantine,
		"--quarantine-bytes=" + strconv.FormatInt(c.QuarantineBytes, 10),
		"--rules=" + c.Rules,
		"--state-dir=" + c.StateDir,
		"--discard-journal=" + c.DiscardJournal,
		"--verbose=" + strconv.FormatBool(c.Verbose),
	}
	args = append(args, c.Policy.args()...)
	return args
}

// ParseWorkerConfig parses the worker's arguments (those after
// WorkerSubcommand).
func ParseWorkerConfig(args []string) (WorkerConfig, error) {
	var c WorkerConfig
	fs := flag.NewFlagSet(WorkerSubcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&c.SockFD, "sock-fd", -1, "")
	fs.StringVar(&c.Root, "root", "", "")
	fs.StringVar(&c.RG, "rg", "", "")
	fs.BoolVar(&c.ReadOnly, "read-only", false, "")
	fs.BoolVar(&c.AllowNoLandlock, "allow-no-landlock", false, "")
	fs.Int64Var(&c.MaxRead, "max-read", 1<<20, "")
	fs.Int64Var(&c.MaxMedia, "max-media", 5<<20, "")
	fs.Func("protect", "", func(v string) error {
		c.Policy.Protect = append(c.Policy.Protect, v)
		return nil
	})
	fs.Func("deny", "", func(v string) error {
		c.Policy.Deny = append(c.Policy.Deny, v)
		return nil
	})
	fs.Int64Var(&c.MaxFileBytes, "max-file-bytes", 0, "")
	fs.Int64Var(&c.MemoryBytes, "memory-bytes", 0, "")
	fs.IntVar(&c.MaxRG, "max-rg", 0, "")
	fs.IntVar(&c.MaxHeavy, "max-heavy", 0, "")
	fs.DurationVar(&c.QueueTimeout, "queue-timeout", 0, "")
	fs.StringVar(&c.Quarantine, "quarantine", "", "")
	fs.Int64Var(&c.QuarantineBytes, "quarantine-bytes", 0, "")
	fs.StringVar(&c.Rules, "rules", "", "")
	fs.StringVar(&c.StateDir, "state-dir", "", "")
	fs.StringVar(&c.DiscardJournal, "discard-journal", "", "")
	fs.BoolVar(&c.Verbose, "verbose", false, "")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() != 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.SockFD < 3 || c.Root == "" || c.RG == "" {
		return c, errors.New("--sock-fd, --root and --rg are required")
	}
	return c, nil
}

// Worker is a started worker process and the front-end's end of its socket.
type Worker struct {
	// Conn is the front-end's end of the socketpair.
	Conn net.Conn
	// Exited is closed when the worker process has exited; Err then holds
	// how it ended.
	Exited <-chan struct{}
	err    error
	pid    int
}

// Err reports how the worker ended. It is valid once Exited is closed.
func (w *Worker) Err() error { return w.err }

// Pid is the worker's process id.
func (w *Worker) Pid() int { return w.pid }

// StartWorker starts exe as the worker with cfg (SockFD is filled in) and
// returns once it runs. The worker gets no stdin or stdout (stdout carries
// MCP), the caller's stderr, an empty environment, and SIGKILL when the
// thread that started it goes away, so it never outlives the front-end.
func StartWorker(exe string, cfg WorkerConfig, stderr io.Writer) (*Worker, error) {
	return start(exe, nil, func(fd int) []string { cfg.SockFD = fd; return cfg.argv() }, workerProcAttr(), stderr)
}

// start runs exe with the arguments argv returns for the child's socket
// descriptor, the process attributes attr and the worker environment.
// extra are inherited first, as descriptors 3, 4, ..., and the socket
// after them.
func start(exe string, extra []*os.File, argv func(sockFD int) []string, attr *syscall.SysProcAttr, stderr io.Writer) (*Worker, error) {
	// Hold ForkLock so no concurrent exec inherits the pair before it is
	// marked close-on-exec.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "worker-socket")
	theirs := os.NewFile(uintptr(fds[1]), "worker-socket-peer")
	defer theirs.Close()

	cmd := exec.Command(exe)
	cmd.ExtraFiles = append(append([]*os.File(nil), extra...), theirs)
	// ExtraFiles[i] becomes fd 3+i in the child.
	cmd.Args = append([]string{exe}, argv(3+len(cmd.ExtraFiles)-1)...)
	cmd.Env = workerEnv
	cmd.Stderr = stderr
	cmd.SysProcAttr = attr

	started := make(chan error, 1)
	exited := make(chan struct{})
	w := &Worker{Exited: exited}
	go func() {
		// Pdeathsig fires when the thread that forked the child exits, not
		// the process: keep this goroutine on its thread for the child's
		// whole life.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		w.pid = cmd.Process.Pid
		started <- nil
		w.err = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		mine.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("worker socket: %w", err)
	}
	w.Conn = conn
	return w, nil
}
