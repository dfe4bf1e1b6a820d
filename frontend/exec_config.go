package frontend

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	// Native is --exec-native: commands may execute what commands built.
	Native bool
	// Cache is --exec-cache, symlinks resolved; "" without.
	Cache string
	// Env are the --exec-env arguments as given; EnvVars the same as
	// NAME=VALUE, resolved at start.
	Env     []string
	EnvVars []string
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
	fs.BoolVar(&o.Native, "exec-native", false,
		"let fs_exec commands execute what commands built: in their scratch, the --exec-cache and, with --exec-writable, the root")
	fs.StringVar(&o.Cache, "exec-cache", "", "a persistent directory outside the root that every fs_exec command may write, at $FSMCP_CACHE")
	fs.Func("exec-env", "NAME=VALUE sets, NAME passes from fsmcp's environment, a variable of every fs_exec command; repeatable", func(v string) error {
		o.Env = append(o.Env, v)
		return nil
	})
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
	if (o.Native || o.Cache != "" || len(o.Env) > 0) && len(o.Programs) == 0 {
		return errors.New("--exec-native, --exec-cache and --exec-env need --exec")
	}
	if err := o.checkEnv(); err != nil {
		return err
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
	if o.Cache != "" {
		if !filepath.IsAbs(o.Cache) {
			return fmt.Errorf("--exec-cache %s: not an absolute path", o.Cache)
		}
		real, err := filepath.EvalSymlinks(o.Cache)
		if err != nil {
			return fmt.Errorf("--exec-cache %s: %w", o.Cache, errors.Unwrap(err))
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return fmt.Errorf("--exec-cache %s: not a directory", o.Cache)
		}
		// The runner binds it by a descriptor opened before its tmpfs
		// covers /tmp, so unlike a program it may lie there.
		if within(real, realRoot) || within(realRoot, real) {
			return fmt.Errorf("--exec-cache %s: overlaps the root", o.Cache)
		}
		o.Cache = real
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

// envReserved are the variables fsmcp sets for every command itself.
var envReserved = []string{"HOME", "TMPDIR", "FSMCP_CACHE"}

// checkEnv resolves --exec-env into EnvVars: NAME=VALUE as given, NAME
// from fsmcp's own environment, where it must be set.
func (o *ExecOptions) checkEnv() error {
	o.EnvVars = nil
	for _, e := range o.Env {
		name, value, set := strings.Cut(e, "=")
		if !envName.MatchString(name) {
			return fmt.Errorf("--exec-env %q: want NAME or NAME=VALUE, NAME of letters, digits and _", e)
		}
		if slices.Contains(envReserved, name) {
			return fmt.Errorf("--exec-env %s: set by fsmcp for every command", name)
		}
		if !set {
			v, ok := os.LookupEnv(name)
			if !ok {
				return fmt.Errorf("--exec-env %s: not set in fsmcp's environment", name)
			}
			value = v
		}
		if strings.IndexByte(value, 0) >= 0 {
			return fmt.Errorf("--exec-env %s: the value holds a NUL byte", name)
		}
		o.EnvVars = append(o.EnvVars, name+"="+value)
	}
	return nil
}

// envName is what --exec-env accepts as a variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// outsideOf refuses a path beneath root or beneath /tmp, and a root
// beneath it.
func outsideOf(path, root, what string) error {
	switch {
	case within(path, root) || within(root, path):
		return fmt.Errorf("%s: overlaps the root; commands never execute or grant anything beneath it", what)
	case within(path, "/tmp"):
		return fmt.Errorf("%s: lies under /tmp, which commands see as their own scratch space", what)
	}
	return nil
}
