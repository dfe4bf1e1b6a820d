package command

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// Main runs the command runner with the arguments that follow
// sandbox.ExecSubcommand and returns the exit code.
func Main(args []string) int {
	if err := run(args); err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp exec: %v\n", err)
		return 1
	}
	return 0
}

func run(args []string) error {
	cfg, err := sandbox.ParseExecConfig(args)
	if err != nil {
		return err
	}
	// Start-up order: socket, programs, namespace, Landlock, seccomp,
	// serve. Both confinements come before the first RPC is read.
	conn, err := link.SocketConn(cfg.SockFD)
	if err != nil {
		return err
	}
	policy, err := cfg.Policy.Compile()
	if err != nil {
		return err
	}
	svc := &Service{writable: cfg.Writable, native: cfg.Native, cache: cfg.Cache, maxTimeout: time.Duration(cfg.MaxTimeoutS) * time.Second,
		rg: cfg.RG, vcs: map[string]*program{}, policy: policy, calls: map[string]*progress{}}
	for _, e := range cfg.Env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" || strings.ContainsRune(e, 0) {
			return fmt.Errorf("--env=%q: want NAME=VALUE", e)
		}
		svc.env = append(svc.env, e)
	}
	if cfg.Cache != "" {
		svc.env = append(svc.env, "FSMCP_CACHE="+sandbox.ExecCache)
	}
	var execFiles []string
	for _, p := range cfg.Programs {
		prog, err := newProgram(p)
		if err != nil {
			return err
		}
		svc.programs = append(svc.programs, prog)
		execFiles = append(execFiles, prog.files...)
		svc.helpers = append(svc.helpers, prog.helpers...)
		svc.gitGranted = svc.gitGranted || prog.isGit()
	}
	var vcsReadDirs []string
	for _, v := range cfg.VCS {
		backend, path, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("--vcs=%s: want BACKEND=PATH", v)
		}
		prog, err := newVCSProgram(backend, path)
		if err != nil {
			return fmt.Errorf("--vcs %s: %w", backend, err)
		}
		for _, d := range prog.readDirs {
			if within(d, cfg.Root) || within(cfg.Root, d) || within(d, "/tmp") {
				return fmt.Errorf("--vcs %s: its library directory %s overlaps the root or /tmp", backend, d)
			}
		}
		svc.vcs[backend] = prog
		svc.vcsNames = append(svc.vcsNames, backend+" "+prog.version)
		execFiles = append(execFiles, prog.files...)
		vcsReadDirs = append(vcsReadDirs, prog.readDirs...)
	}
	rgFiles, err := sandbox.ExecDeps(cfg.RG)
	if err != nil {
		return fmt.Errorf("resolve rg's libraries: %w", err)
	}
	execFiles = append(execFiles, rgFiles...)
	// The --rules file is read, as the worker reads it, by a reader
	// process started now, before the namespace covers /tmp and before
	// Landlock: each call reads the version in force as it starts.
	if cfg.Rules != "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("name the runner's executable: %w", err)
		}
		if svc.rules, err = rulesfile.Start(exe, cfg.Rules, cfg.AllowNoLandlock); err != nil {
			return err
		}
	}
	for _, d := range cfg.ReadDirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("--exec-read %s: not an absolute path", d)
		}
	}
	svc.readDirs = cfg.ReadDirs
	for _, p := range svc.programs {
		svc.execFiles = append(svc.execFiles, p.files...)
	}
	svc.execFiles = unique(svc.execFiles)
	layout, err := sandbox.EnterExecNamespace(cfg.Root, sandbox.ExecMounts{Writable: cfg.Writable, Native: cfg.Native, Cache: cfg.Cache})
	if err != nil {
		return err
	}
	svc.layout = layout
	layout.Policy = cfg.Policy
	if cfg.PidsFD >= 0 {
		// Passed on to each shim explicitly, never inherited by rg.
		unix.CloseOnExec(cfg.PidsFD)
		layout.Pids = os.NewFile(uintptr(cfg.PidsFD), "pids-cgroup")
		svc.pids = pidsBound{controller: cfg.PidsController, cgroup: cfg.PidsCgroup, max: cfg.PidsMax}
	} else {
		svc.pids = pidsBound{controller: "none", none: cfg.PidsNone}
	}
	st, err := layout.ConfineRunner(cfg.Writable, unique(execFiles), unique(append(vcsReadDirs, cfg.ReadDirs...)))
	switch {
	case errors.Is(err, sandbox.ErrNoLandlock) && cfg.AllowNoLandlock:
		fmt.Fprintln(os.Stderr, "fsmcp exec: WARNING: no Landlock: commands are confined by namespaces and seccomp only")
	case err != nil:
		return err
	case cfg.Verbose:
		fmt.Fprintf(os.Stderr, "fsmcp exec: landlock ABI %d (kernel %d), rules: %s\n",
			st.ABI, st.KernelABI, strings.Join(st.Rules, "; "))
	}
	// Looked at before seccomp refuses the netlink socket it takes.
	svc.noNetwork = noNetwork()
	sc, err := sandbox.FilterRunner(cfg.Writable, cfg.Native)
	switch {
	case errors.Is(err, sandbox.ErrNoSeccomp) && cfg.AllowNoLandlock:
		fmt.Fprintf(os.Stderr, "fsmcp exec: WARNING: %v\n", err)
	case err != nil:
		return err
	case cfg.Verbose:
		fmt.Fprintf(os.Stderr, "fsmcp exec: seccomp filter: %d system calls refused\n", sc.Denied)
	}
	if svc.root, err = os.OpenRoot(sandbox.ExecRoot); err != nil {
		return fmt.Errorf("open root: %w", err)
	}
	if svc.selftest, err = svc.probe(sc.Mode == "filter"); err != nil {
		return err
	}
	svc.confinement = svc.describe(st, sc, layout)
	return link.Serve(conn, "fsmcp exec", func(srv *grpc.Server) { fsmcpv1.RegisterExecServiceServer(srv, svc) })
}

// probe is the runner's self-test: a command, confined as fs_exec's are,
// opens a granted program (outside the root) with access mode 3 and for
// reading, and tries fchmod through each descriptor; the kernel must
// refuse (the open with access mode 3 only when the seccomp filter is
// on). A refusal that does not come ends start-up.
func (s *Service) probe(filtered bool) ([]*fsmcpv1.Probe, error) {
	target := s.programs
	if len(target) == 0 {
		for _, p := range s.vcs {
			target = append(target, p)
		}
	}
	if len(target) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.run(ctx, runSpec{prog: target[0], argv: []string{target[0].path}, writable: s.writable,
		files: target[0].files, timeout: 30 * time.Second, capture: 4096, probe: true})
	if err != nil {
		return nil, fmt.Errorf("self-test: %v", err)
	}
	if !res.Exited || res.Exit != 0 {
		return nil, fmt.Errorf("self-test: the probe did not run: %s", strings.TrimSpace(string(res.Stderr)))
	}
	var probes []*fsmcpv1.Probe
	var failed []string
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		name, result, _ := strings.Cut(l, "\t")
		p := &fsmcpv1.Probe{Name: name, Result: result, Refused: result == "EPERM" || result == "EROFS" || result == "EACCES"}
		probes = append(probes, p)
		if !p.Refused && (name != sandbox.ProbeOpenMode3 || filtered) {
			failed = append(failed, fmt.Sprintf("%s: %s", name, result))
		}
	}
	if len(failed) > 0 {
		return probes, fmt.Errorf("self-test failed, refusing to run commands unconfined: the kernel allowed %s", strings.Join(failed, "; "))
	}
	return probes, nil
}

// noNetwork reports whether no network interface is up: the runner's own
// network namespace has only a loopback, down.
func noNetwork() bool {
	ifs, err := net.Interfaces()
	if err != nil {
		return false
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp != 0 {
			return false
		}
	}
	return true
}

// program is one granted program and what running it needs.
type program struct {
	// path is what is executed; args come first after argv[0] (an
	// interpreter's options and script).
	path string
	base string
	args []string
	// files are granted read and execute (its helpers' too), readDirs
	// read.
	files    []string
	readDirs []string
	version  string
	// helpers are the toolchain's own programs it runs (toolHelpers).
	helpers []string
}

func newProgram(path string) (*program, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	files, err := sandbox.ExecDeps(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	helpers, err := toolHelpers(path, files[0])
	if err != nil {
		return nil, fmt.Errorf("%s: find its helper programs: %w", path, err)
	}
	more, err := helperFiles(helpers)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &program{path: path, base: filepath.Base(path), files: append(files, more...), helpers: helpers}, nil
}

// newVCSProgram is a version-control backend's program, with its version.
func newVCSProgram(backend, path string) (*program, error) {
	if backend == "hg" {
		return newHg(path)
	}
	prog, err := newProgram(path)
	if err != nil {
		return nil, err
	}
	argv := []string{path, "--version"}
	if backend == "svn" {
		// Without a configuration directory svn would create one in
		// the operator's home just to print its version.
		argv = []string{path, "--config-dir", "/dev/null", "--version", "--quiet"}
	}
	prog.version, err = version(argv, nil)
	return prog, err
}

// version is the first line of what argv prints, run before confinement,
// in /, with env alone as its environment.
func version(argv, env []string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = "/", append([]string{}, env...)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("run %s: %w", strings.Join(argv, " "), err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first), nil
}

// within reports whether path is dir or lies beneath it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
