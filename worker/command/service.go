package command

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"golang.org/x/sys/unix"
)

// Service implements fsmcpv1.ExecServiceServer.
type Service struct {
	fsmcpv1.UnimplementedExecServiceServer
	root     *os.Root
	layout   *sandbox.ExecLayout
	programs []*program
	// execFiles are what every fs_exec command may execute: the granted
	// programs and their libraries, so a granted shell runs the others.
	execFiles []string
	vcs       map[string]*program
	vcsNames  []string
	readDirs  []string
	writable  bool
	// native is --exec-native; cache --exec-cache (the host directory);
	// env the --exec-env variables and FSMCP_CACHE, added to every
	// fs_exec command's environment.
	native bool
	cache  string
	env    []string
	// helpers are what granting the programs granted besides them.
	helpers []string
	// gitGranted: git is one of the programs.
	gitGranted bool
	// calls are the running Exec calls that asked for progress, by
	// call_id.
	callsMu    sync.Mutex
	calls      map[string]*progress
	maxTimeout time.Duration
	rg         string
	// noNetwork: the runner found no interface up in its namespace.
	noNetwork   bool
	confinement *fsmcpv1.ExecConfinement
	pids        pidsBound
	// selftest is what the start-up probes answered.
	selftest []*fsmcpv1.Probe
	// rules is the --rules file, read again when it changes; nil
	// without one.
	rules *rulesfile.File
	// policy is --protect and --deny, compiled (gitDiff filters by it).
	policy *sandbox.Matcher
}

// pidsBound is what bounds the tasks of all commands together.
type pidsBound struct {
	// controller is "cgroup v1", "cgroup v2" or "none"; cgroup the
	// cgroup's directory and max its pids.max; none why there is none.
	controller, cgroup, none string
	max                      int64
}

var _ fsmcpv1.ExecServiceServer = (*Service)(nil)

// The bounds of one command.
const (
	// MaxBytes bounds each stream a reply returns.
	MaxBytes = 1 << 20
	// captureBytes bounds each stream the runner keeps before a grep
	// filters it; the rest is read and dropped, so the command never
	// blocks on a full pipe.
	captureBytes = 1 << 20
)

// limits are every command's resource limits.
var limits = sandbox.Limits{
	Procs:       256,
	FileBytes:   1 << 30,
	CPUSeconds:  600,
	MemoryBytes: 4 << 30,
	Files:       1024,
}

// baseEnv is every command's environment, besides HOME and TMPDIR (its
// scratch directory). Nothing of the server's own environment is passed.
var baseEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}

func (s *Service) describe(st sandbox.Status, sc sandbox.Seccomp, l *sandbox.ExecLayout) *fsmcpv1.ExecConfinement {
	c := &fsmcpv1.ExecConfinement{
		LandlockAbi:    int32(st.ABI),
		ReadDirs:       s.readDirs,
		Writable:       s.writable,
		Seccomp:        sc.Mode,
		Namespaces:     []string{"user", "mount", "network", "ipc", "pid"},
		MaxTimeoutS:    int64(s.maxTimeout / time.Second),
		Rlimits:        limits.Strings(),
		Vcs:            s.vcsNames,
		NoexecMounts:   l.NoExec,
		NetworkDenied:  s.noNetwork,
		Env:            append(append(append([]string{}, baseEnv...), "HOME=<scratch>", "TMPDIR=<scratch>"), s.env...),
		Native:         s.native,
		Cache:          s.cache,
		Helpers:        unique(s.helpers),
		PidsController: s.pids.controller,
		PidsCgroup:     s.pids.cgroup,
		PidsMax:        s.pids.max,
		PidsNone:       s.pids.none,
		MetadataGuards: sandbox.MetadataGuards(s.writable, s.native, s.cache != "", sc.Mode == "filter"),
		Selftest:       s.selftest,
	}
	if sc.Mode == "filter" {
		c.SeccompDeniedSyscalls = int32(sandbox.CommandSeccompDenied(s.writable, s.native))
	}
	var files, vcsFiles, vcsDirs []string
	for _, p := range s.programs {
		c.Programs = append(c.Programs, p.path)
		files = append(files, p.files...)
	}
	for _, p := range s.vcs {
		vcsFiles = append(vcsFiles, p.files...)
		vcsDirs = append(vcsDirs, p.readDirs...)
	}
	c.ExecFiles, c.VcsExecFiles, c.VcsReadDirs = unique(files), unique(vcsFiles), unique(vcsDirs)
	return c
}

// Hello implements fsmcpv1.ExecServiceServer.
func (s *Service) Hello(ctx context.Context, req *fsmcpv1.ExecServiceHelloRequest) (*fsmcpv1.ExecServiceHelloResponse, error) {
	if req.GetVersion() != fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1 {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "protocol version %v, want %v",
			req.GetVersion(), fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1)
	}
	return &fsmcpv1.ExecServiceHelloResponse{Version: fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1, Confinement: s.confinement}, nil
}

// unique returns v sorted, without repeats.
func unique(v []string) []string {
	v = slices.Clone(v)
	slices.Sort(v)
	return slices.Compact(v)
}

func errorf(code fsmcpv1.ErrorCode, format string, args ...any) *link.Error {
	return link.Errorf(code, "", format, args...)
}

// lookup finds the granted program argv0 names, by its path or base name.
func (s *Service) lookup(argv0 string) *program {
	for _, p := range s.programs {
		if argv0 == p.path || argv0 == p.base {
			return p
		}
	}
	return nil
}

// Exec implements fsmcpv1.ExecServiceServer.
func (s *Service) Exec(ctx context.Context, req *fsmcpv1.ExecRequest) (*fsmcpv1.ExecResponse, error) {
	argv := req.GetArgv()
	if len(argv) == 0 {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "argv is empty")
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "argv contains a NUL byte")
		}
	}
	prog := s.lookup(argv[0])
	if prog == nil {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
			"argv[0] %q is not a program this server may run", clip(argv[0]))
	}
	timeout, maxBytes, err := s.bounds(req.GetTimeoutMs(), req.GetMaxBytes())
	if err != nil {
		return nil, err
	}
	capture := maxBytes
	if req.GetHasGrep() {
		if err := s.checkGrep(ctx, req.GetGrep()); err != nil {
			return nil, err
		}
		capture = captureBytes
	}
	protected, err := protectedPaths(req.GetProtected())
	if err != nil {
		return nil, err
	}
	lines := s.lines("fs_exec")
	if s.writable {
		var second *sandbox.ErrSecondName
		switch err := s.layout.CheckSecondNames(lines, protected); {
		case errors.As(err, &second):
			return nil, &link.Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, Message: err.Error(), Path: second.Path}
		case err != nil:
			return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "apply the policy: %v", err)
		}
	}
	env := s.env
	if s.gitGranted {
		// A granted git gets fs_vcs's hardening, however it is run (by
		// a shell, by make): no system or global configuration, the
		// repository's programs switched off. Each filter driver is
		// named when git itself is argv[0]. The operator's --exec-env
		// comes last, and so prevails.
		hardening := append(slices.Clone(gitEnv), configEnv(gitExecConfig)...)
		if prog.isGit() {
			c := &vcsCall{backend: "git", prog: prog, path: req.GetCwd(), timeout: timeout.Milliseconds(), lines: lines}
			if hardening, err = s.gitHardening(ctx, c, timeout, gitExecConfig); err != nil {
				return nil, err
			}
		}
		env = append(hardening, env...)
	}
	spec := runSpec{prog: prog, argv: argv, env: env, cwd: req.GetCwd(), stdin: req.GetStdin(), lines: lines, protected: protected,
		writable: s.writable, native: s.native, cache: s.cache != "", files: s.execFiles, readDirs: s.readDirs, timeout: timeout, capture: capture}
	if id := req.GetCallId(); id != "" {
		spec.progress = &progress{}
		if !s.track(id, spec.progress) {
			return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "call_id %q is in use", clip(id))
		}
		defer s.untrack(id)
	}
	res, err := s.run(ctx, spec)
	if err != nil {
		return nil, err
	}
	if req.GetHasGrep() {
		out, err := s.grep(ctx, req.GetGrep(), res.Stdout)
		if err != nil {
			return nil, err
		}
		res.Stdout = out
	}
	if int64(len(res.Stdout)) > maxBytes {
		res.Stdout, res.StdoutTruncated = res.Stdout[:maxBytes], true
	}
	return &fsmcpv1.ExecResponse{Result: res}, nil
}

// bounds checks a call's timeout and output bound against the runner's.
func (s *Service) bounds(timeoutMS, maxBytes int64) (time.Duration, int64, error) {
	timeout := time.Duration(timeoutMS) * time.Millisecond
	if timeout <= 0 || timeout > s.maxTimeout {
		return 0, 0, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "the timeout must be positive and at most %v", s.maxTimeout)
	}
	if maxBytes <= 0 || maxBytes > MaxBytes {
		return 0, 0, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "max_bytes must be between 1 and %d", MaxBytes)
	}
	return timeout, maxBytes, nil
}

func clip(s string) string {
	if len(s) > 256 {
		return s[:256] + "..."
	}
	return s
}

// runSpec is one command to run.
type runSpec struct {
	prog     *program
	argv     []string
	env      []string
	cwd      []byte
	stdin    []byte
	writable bool
	// native and cache grant --exec-native and --exec-cache.
	native, cache bool
	// files are granted read and execute, readDirs read.
	files    []string
	readDirs []string
	// scratchArgs, when set, follow argv[0]: options naming the
	// command's scratch directory, known only once it exists.
	scratchArgs func(scratch string) []string
	timeout     time.Duration
	// capture bounds each stream kept.
	capture int64
	// probe runs the self-test's probes on prog's path instead of it.
	probe bool
	// lines are the --rules lines of the call's tool (lines).
	lines []sandbox.RuleLine
	// protected are the call's literal protected paths (protectedPaths).
	protected []string
	// progress, when set, follows the command for ExecProgress.
	progress *progress
}

// progress is how far one running command is.
type progress struct {
	// start is when the command started, in Unix nanoseconds; 0 before.
	start atomic.Int64
	// output counts the bytes it wrote, both streams.
	output atomic.Int64
}

// track registers a running call's progress under id; false when the id
// is taken.
func (s *Service) track(id string, p *progress) bool {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if _, taken := s.calls[id]; taken {
		return false
	}
	s.calls[id] = p
	return true
}

func (s *Service) untrack(id string) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	delete(s.calls, id)
}

// ExecProgress implements fsmcpv1.ExecServiceServer.
func (s *Service) ExecProgress(ctx context.Context, req *fsmcpv1.ExecProgressRequest) (*fsmcpv1.ExecProgressResponse, error) {
	s.callsMu.Lock()
	p := s.calls[req.GetCallId()]
	s.callsMu.Unlock()
	if p == nil || p.start.Load() == 0 {
		return &fsmcpv1.ExecProgressResponse{}, nil
	}
	return &fsmcpv1.ExecProgressResponse{Running: true, OutputBytes: p.output.Load(),
		ElapsedMs: time.Since(time.Unix(0, p.start.Load())).Milliseconds()}, nil
}

// protectedPaths checks an ExecRequest's protected paths: each is "" (the
// whole root) or a clean relative path.
func protectedPaths(ps [][]byte) ([]string, error) {
	out := make([]string, 0, len(ps))
	for _, b := range ps {
		p := string(b)
		if p != "" && (strings.IndexByte(p, 0) >= 0 || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../")) {
			return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "protected path %q is not a clean root-relative path", clip(p))
		}
		out = append(out, p)
	}
	return out, nil
}

// lines are the --rules lines in force for tool (without --tools-prefix),
// read when a call starts: its commands' confinement leaves out what
// they deny, exactly as it leaves out --deny.
func (s *Service) lines(tool string) []sandbox.RuleLine {
	if s.rules == nil {
		return nil
	}
	return s.rules.Lines(tool)
}

// run runs spec confined and collects its bounded output. A command that
// exits non-zero, is killed or times out is a result, not an error.
func (s *Service) run(ctx context.Context, spec runSpec) (*fsmcpv1.CommandResult, error) {
	dir, err := link.OpenDir(s.root, spec.cwd)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	scratch, err := s.layout.NewScratch()
	if err != nil {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "create scratch directory: %v", err)
	}
	defer os.RemoveAll(scratch)
	env := append(append(append([]string{}, baseEnv...), "HOME="+scratch, "TMPDIR="+scratch), spec.env...)
	argv := spec.argv
	if spec.scratchArgs != nil {
		argv = append(append(slices.Clip(argv[:1]), spec.scratchArgs(scratch)...), argv[1:]...)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "pipe: %v", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "pipe: %v", err)
	}
	defer errR.Close()
	start := time.Now()
	p, err := s.layout.Start(&sandbox.Command{
		Path: spec.prog.path, Args: argv, Env: env, Dir: dir,
		Stdin: bytes.NewReader(spec.stdin), Stdout: outW, Stderr: errW,
		Writable: spec.writable, Native: spec.native, Cache: spec.cache, ExecFiles: spec.files, ReadDirs: spec.readDirs,
		Scratch: scratch, Limits: limits, Probe: spec.probe, Lines: spec.lines,
		Protected: spec.protected,
	})
	outW.Close()
	errW.Close()
	if err != nil {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "%v", err)
	}
	var counted *atomic.Int64
	if spec.progress != nil {
		spec.progress.start.Store(start.UnixNano())
		counted = &spec.progress.output
	}
	stdout := make(chan captured, 1)
	stderr := make(chan captured, 1)
	go func() { stdout <- capture(outR, spec.capture, counted) }()
	go func() { stderr <- capture(errR, spec.capture, counted) }()
	timer := time.NewTimer(spec.timeout)
	defer timer.Stop()
	timedOut, cancelled := false, false
	select {
	case <-p.Done():
	case <-timer.C:
		timedOut = true
		p.Kill()
	case <-ctx.Done():
		cancelled = true
		p.Kill()
	}
	ws, werr := p.Wait()
	// The namespace is gone with its first process, so both pipes are at
	// their end.
	o, e := <-stdout, <-stderr
	if cancelled {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED, "the call was cancelled; the command was killed")
	}
	if werr != nil {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "wait: %v", werr)
	}
	res := &fsmcpv1.CommandResult{
		TimedOut:        timedOut,
		DurationMs:      time.Since(start).Milliseconds(),
		Stdout:          o.data,
		StdoutTruncated: o.dropped,
		Stderr:          e.data,
		StderrTruncated: e.dropped,
	}
	switch {
	case ws.Exited():
		res.Exited, res.Exit = true, int32(ws.ExitStatus())
	case ws.Signaled():
		res.Signal = unix.SignalName(ws.Signal())
	}
	return res, nil
}

// captured is what was kept of one stream and whether bytes were dropped.
type captured struct {
	data    []byte
	dropped bool
}

// capture keeps the first limit bytes of r and reads the rest to its end,
// adding what it reads to counted (when not nil) as it goes.
func capture(r io.Reader, limit int64, counted *atomic.Int64) captured {
	if counted != nil {
		r = countingReader{r, counted}
	}
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, io.LimitReader(r, limit))
	n, _ := io.Copy(io.Discard, r)
	return captured{data: buf.Bytes(), dropped: n > 0}
}

// countingReader adds the bytes read to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// grepArgs run rg over standard input: every byte is text (a NUL does not
// end the search), no configuration file, no colour, no line numbers.
func grepArgs(pattern string) []string {
	return []string{"--no-config", "--color=never", "--no-line-number", "--no-filename", "--text", "--regexp", pattern, "-"}
}

// checkGrep runs rg on empty input: a pattern it cannot parse is refused
// before the command runs.
func (s *Service) checkGrep(ctx context.Context, pattern string) error {
	_, err := s.grep(ctx, pattern, nil)
	return err
}

// grep keeps the lines of data that match pattern, through rg.
func (s *Service) grep(ctx context.Context, pattern string, data []byte) ([]byte, error) {
	cmd := exec.CommandContext(ctx, s.rg, grepArgs(pattern)...)
	cmd.Dir, cmd.Env = "/", []string{}
	cmd.Stdin = bytes.NewReader(data)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return nil, nil // no line matched
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "grep: %s", clip(strings.TrimSpace(errOut.String())))
	case ctx.Err() != nil:
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED, "grep: the call was cancelled")
	case err != nil:
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "grep: %v", err)
	}
	return out.Bytes(), nil
}
