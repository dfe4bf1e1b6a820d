//go:build linux

package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ExecSubcommand is the hidden first argument that makes the fsmcp binary
// run as the command runner: the confined process that runs fs_exec and
// fs_vcs_* commands. CommandSubcommand makes it the short-lived shim that
// confines one command further and then becomes it. Both are dispatched
// before any flag parsing.
const (
	ExecSubcommand    = "__exec"
	CommandSubcommand = "__command"
)

// ExecConfig is everything the command runner learns from its trusted
// parent. Like WorkerConfig it travels in argv, never over the RPC socket.
type ExecConfig struct {
	// SockFD is the runner's end of its socketpair.
	SockFD int
	// Root is the directory commands see as theirs, as resolved by the
	// front-end.
	Root string
	// RG is ripgrep, which filters stdout for a call's grep.
	RG string
	// Programs are the absolute paths fs_exec may run (--exec).
	Programs []string
	// ReadDirs are directories granted read only (--exec-read).
	ReadDirs []string
	// Writable lets fs_exec commands write the root (--exec-writable).
	Writable bool
	// Native lets commands execute what commands built: in the scratch,
	// the cache and, when Writable, the root (--exec-native).
	Native bool
	// Cache is a directory outside the root every command may write, at
	// ExecCache in its view (--exec-cache); "" without one.
	Cache string
	// Env is NAME=VALUE added to every fs_exec command's environment
	// (--exec-env), resolved by the front-end.
	Env []string
	// MaxTimeoutS is the largest timeout a call may ask for, in seconds.
	MaxTimeoutS int64
	// VCS maps a version-control backend to its program ("git=/usr/bin/git").
	VCS []string
	// AllowNoLandlock lets the runner start on a kernel without Landlock.
	AllowNoLandlock bool
	// Policy is the operator's protected and denied paths, which each
	// command's Landlock rules leave out (see rootRules).
	Policy Policy
	// Rules, when set, is the --rules file (an absolute path): the
	// runner reads it, as the worker does, and gives each command the
	// lines of its tool (Command.Lines).
	Rules string
	// Pids is the commands' pids cgroup, nil without one; PidsNone then
	// says why there is none.
	Pids     *PidsCgroup
	PidsNone string
	// Verbose has the runner say on stderr how it confined itself.
	Verbose bool
	// pidsFD is where Pids.Procs lands in the runner.
	pidsFD int
}

func (c ExecConfig) argv() []string {
	a := []string{
		ExecSubcommand,
		"--sock-fd=" + strconv.Itoa(c.SockFD),
		"--root=" + c.Root,
		"--rg=" + c.RG,
		"--writable=" + strconv.FormatBool(c.Writable),
		"--native=" + strconv.FormatBool(c.Native),
		"--cache=" + c.Cache,
		"--max-timeout=" + strconv.FormatInt(c.MaxTimeoutS, 10),
		"--allow-no-landlock=" + strconv.FormatBool(c.AllowNoLandlock),
		"--verbose=" + strconv.FormatBool(c.Verbose),
	}
	for _, p := range c.Programs {
		a = append(a, "--program="+p)
	}
	for _, d := range c.ReadDirs {
		a = append(a, "--read-dir="+d)
	}
	for _, v := range c.VCS {
		a = append(a, "--vcs="+v)
	}
	for _, e := range c.Env {
		a = append(a, "--env="+e)
	}
	a = append(a, c.Policy.args()...)
	if c.Rules != "" {
		a = append(a, "--rules="+c.Rules)
	}
	if c.Pids != nil {
		a = append(a, "--pids-fd="+strconv.Itoa(c.pidsFD), "--pids-max="+strconv.FormatInt(c.Pids.Max, 10),
			"--pids-controller="+c.Pids.Version, "--pids-cgroup="+c.Pids.Dir)
	} else {
		a = append(a, "--pids-none="+c.PidsNone)
	}
	return a
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// ParseExecConfig parses the runner's arguments (those after
// ExecSubcommand).
func ParseExecConfig(args []string) (RunnerConfig, error) {
	var c RunnerConfig
	fs := flag.NewFlagSet(ExecSubcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&c.SockFD, "sock-fd", -1, "")
	fs.StringVar(&c.Root, "root", "", "")
	fs.StringVar(&c.RG, "rg", "", "")
	fs.BoolVar(&c.Writable, "writable", false, "")
	fs.BoolVar(&c.Native, "native", false, "")
	fs.StringVar(&c.Cache, "cache", "", "")
	fs.Var((*listFlag)(&c.Env), "env", "")
	fs.Int64Var(&c.MaxTimeoutS, "max-timeout", 300, "")
	fs.BoolVar(&c.AllowNoLandlock, "allow-no-landlock", false, "")
	fs.Var((*listFlag)(&c.Programs), "program", "")
	fs.Var((*listFlag)(&c.ReadDirs), "read-dir", "")
	fs.Var((*listFlag)(&c.VCS), "vcs", "")
	fs.Var((*listFlag)(&c.Policy.Protect), "protect", "")
	fs.Var((*listFlag)(&c.Policy.Deny), "deny", "")
	fs.StringVar(&c.Rules, "rules", "", "")
	fs.IntVar(&c.PidsFD, "pids-fd", -1, "")
	fs.Int64Var(&c.PidsMax, "pids-max", 0, "")
	fs.StringVar(&c.PidsController, "pids-controller", "", "")
	fs.StringVar(&c.PidsCgroup, "pids-cgroup", "", "")
	fs.StringVar(&c.PidsNone, "pids-none", "", "")
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
	if _, err := c.Policy.Compile(); err != nil {
		return c, err
	}
	if (c.PidsFD >= 0) != (c.PidsCgroup != "") || (c.PidsFD >= 0) == (c.PidsNone != "") {
		return c, errors.New("want --pids-fd with --pids-cgroup, or --pids-none")
	}
	return c, nil
}

// RunnerConfig is ExecConfig as the runner parses it: the pids cgroup is
// a descriptor and a description.
type RunnerConfig struct {
	ExecConfig
	// PidsFD is the cgroup's cgroup.procs, -1 without a cgroup.
	PidsFD int
	// PidsMax is its pids.max; PidsController ("cgroup v1", "cgroup v2")
	// and PidsCgroup (its directory) say which cgroup it is.
	PidsMax        int64
	PidsController string
	PidsCgroup     string
}

// StartExec starts exe as the command runner with cfg (SockFD is filled
// in), like StartWorker, in new user, mount, network and IPC namespaces
// (see startExec).
func StartExec(exe string, cfg ExecConfig, stderr io.Writer) (*Worker, error) {
	var extra []*os.File
	if cfg.Pids != nil {
		// Descriptor 3 in the runner, the socket after it.
		extra = append(extra, cfg.Pids.Procs)
		cfg.pidsFD = 3
	}
	return start(exe, extra, func(fd int) []string { cfg.SockFD = fd; return cfg.argv() }, execProcAttr(), stderr)
}
