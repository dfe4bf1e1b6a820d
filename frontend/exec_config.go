package frontend

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ExecOptions are the flags that turn commands on. With none of them, no
// command runner starts and fs_exec and fs_vcs_* are absent.
type ExecOptions struct {
	// Programs are the --exec programs, absolute, symlinks resolved.
	Programs []string
	// ReadDirs are the --exec-read directories, symlinks resolved.
	ReadDirs []string
	// Writable is --exec-writable.
	Writable bool
	// MaxTimeoutS is --exec-max-timeout, in seconds.
	MaxTimeoutS int64
	// MaxPids is --exec-max-pids: the pids.max of the commands' cgroup.
	MaxPids int64
	// VCS lists the --vcs backends; VCSPrograms their programs, found on
	// PATH at start-up.
	VCS         []string
	VCSPrograms []string
}

// enabled reports whether a command runner is needed.
func (o *ExecOptions) enabled() bool { return len(o.Programs) > 0 || len(o.VCS) > 0 }

// The bounds of --exec-max-pids. 1024 tasks lets a parallel build run
// (each Go or compiler process takes several threads) and keeps a fork
// bomb far from the host's pid_max.
const (
	defaultMaxPids = 1024
	minMaxPids     = 16
)

// vcsBackends are the version-control systems fsmcp serves, each with its
// program, found on PATH; a backend whose program is not installed is
// refused at start-up.
var vcsBackends = map[string]string{"git": "git", "hg": "hg", "svn": "svn"}

func execFlags(fs *flag.FlagSet, o *ExecOptions) {
	fs.Func("exec", "a program fs_exec may run (absolute path); repeatable; fs_exec is absent without it", func(v string) error {
		o.Programs = append(o.Programs, v)
		return nil
	})
	fs.Func("exec-read", "a directory fs_exec commands may read (an interpreter's library directory); repeatable", func(v string) error {
		o.ReadDirs = append(o.ReadDirs, v)
		return nil
	})
	fs.BoolVar(&o.Writable, "exec-writable", false, "let fs_exec commands write beneath the root")
	fs.Int64Var(&o.MaxTimeoutS, "exec-max-timeout", 300, "the largest timeout_s an fs_exec call may ask for, in seconds")
	fs.Int64Var(&o.MaxPids, "exec-max-pids", defaultMaxPids,
		"the most tasks (processes and threads) all commands together may have: the pids.max of their cgroup")
	fs.Func("vcs", "register fs_vcs_status and fs_vcs_diff for this backend (git, hg or svn); repeatable", func(v string) error {
		if _, ok := vcsBackends[v]; !ok {
			return fmt.Errorf("want git, hg or svn")
		}
		if slices.Contains(o.VCS, v) {
			return fmt.Errorf("%s given twice", v)
		}
		o.VCS = append(o.VCS, v)
		return nil
	})
}

// check validates the command flags against the resolved root. Commands
// see /tmp as their own (the runner covers it), so nothing they are granted
// may lie there, and nothing they may execute may lie beneath the root.
func (o *ExecOptions) check(root string, readOnly bool) error {
	if o.MaxTimeoutS <= 0 {
		return errors.New("--exec-max-timeout must be positive")
	}
	if o.MaxPids < minMaxPids {
		return fmt.Errorf("--exec-max-pids must be at least %d: each command's shim is a Go process with threads of its own", minMaxPids)
	}
	if o.Writable && readOnly {
		return errors.New("--exec-writable contradicts --read-only")
	}
	if o.Writable && len(o.Programs) == 0 {
		return errors.New("--exec-writable needs --exec")
	}
	if len(o.ReadDirs) > 0 && len(o.Programs) == 0 {
		return errors.New("--exec-read needs --exec")
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("--root %s: %w", root, errors.Unwrap(err))
	}
	bases := map[string]string{}
	for _, p := range o.Programs {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("--exec %s: not an absolute path", p)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("--exec %s: %w", p, errors.Unwrap(err))
		}
		fi, err := os.Stat(real)
		if err != nil {
			return fmt.Errorf("--exec %s: %w", p, errors.Unwrap(err))
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("--exec %s: not an executable file", p)
		}
		if err := outsideOf(real, realRoot, "--exec "+p); err != nil {
			return err
		}
		if prev, dup := bases[filepath.Base(p)]; dup {
			return fmt.Errorf("--exec %s and %s share the base name argv[0] names them by", prev, p)
		}
		bases[filepath.Base(p)] = p
	}
	for i, d := range o.ReadDirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("--exec-read %s: not an absolute path", d)
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return fmt.Errorf("--exec-read %s: %w", d, errors.Unwrap(err))
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return fmt.Errorf("--exec-read %s: not a directory", d)
		}
		if err := outsideOf(real, realRoot, "--exec-read "+d); err != nil {
			return err
		}
		o.ReadDirs[i] = real
	}
	o.VCSPrograms = nil
	for _, v := range o.VCS {
		path, err := exec.LookPath(vcsBackends[v])
		if err != nil {
			return fmt.Errorf("--vcs %s: %s not found on PATH", v, vcsBackends[v])
		}
		if path, err = filepath.Abs(path); err != nil {
			return err
		}
		if err := outsideOf(path, realRoot, "--vcs "+v); err != nil {
			return err
		}
		o.VCSPrograms = append(o.VCSPrograms, v+"="+path)
	}
	return nil
}

// outsideOf refuses a path beneath root or beneath /tmp, and a root
// beneath it.
func outsideOf(path, root, what string) error {
	within := func(p, dir string) bool {
		return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
	}
	switch {
	case within(path, root) || within(root, path):
		return fmt.Errorf("%s: overlaps the root; commands never execute or grant anything beneath it", what)
	case within(path, "/tmp"):
		return fmt.Errorf("%s: lies under /tmp, which commands see as their own scratch space", what)
	}
	return nil
}
