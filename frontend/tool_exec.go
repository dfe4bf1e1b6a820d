package frontend

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
)

// execClient is the front-end's connection to the command runner.
type execClient struct {
	fsmcpv1.ExecServiceClient
	conn        *workerClient
	runner      *sandbox.Worker
	confinement *fsmcpv1.ExecConfinement
	// pids is the commands' pids cgroup, nil without one.
	pids *sandbox.PidsCgroup
	// calls numbers the Exec calls that ask for progress (call_id).
	calls atomic.Uint64
}

// startExec starts the command runner when a command flag asks for one,
// and waits for its Hello. It returns nil when commands are off.
func startExec(ctx context.Context, cfg *Config, stderr io.Writer) (*execClient, error) {
	if !cfg.Exec.enabled() {
		return nil, nil
	}
	// The pids cgroup, and its reaper, come first: the runner gets the
	// cgroup's cgroup.procs, each command's shim moves itself in.
	pids, err := sandbox.NewPidsCgroup(cfg.Exec.MaxPids)
	pidsNone := ""
	switch {
	case errors.Is(err, sandbox.ErrNoPidsCgroup):
		pidsNone = err.Error()
		fmt.Fprintf(stderr, "fsmcp: commands' processes are bounded by RLIMIT_NPROC only, which does not bind root: %v\n", err)
	case err != nil:
		return nil, fmt.Errorf("commands' pids cgroup: %w", err)
	default:
		if err := pids.StartReaper("/proc/self/exe"); err != nil {
			pids.CloseProcs()
			_ = os.Remove(pids.Dir)
			return nil, err
		}
		defer pids.CloseProcs()
	}
	r, err := sandbox.StartExec("/proc/self/exe", sandbox.ExecConfig{
		Root:            cfg.Root,
		RG:              cfg.RG,
		Programs:        cfg.Exec.Programs,
		ReadDirs:        cfg.Exec.ReadDirs,
		Writable:        cfg.Exec.Writable,
		Native:          cfg.Exec.Native,
		Cache:           cfg.Exec.Cache,
		Env:             cfg.Exec.EnvVars,
		MaxTimeoutS:     cfg.Exec.MaxTimeoutS,
		VCS:             cfg.Exec.VCSPrograms,
		AllowNoLandlock: cfg.AllowNoLandlock,
		Policy:          cfg.Policy(),
		Rules:           cfg.Rules,
		Pids:            pids,
		PidsNone:        pidsNone,
		Verbose:         cfg.Verbose,
	}, stderr)
	if err != nil {
		if pids != nil {
			pids.Release()
		}
		return nil, fmt.Errorf("command runner: %w", err)
	}
	// The gRPC client setup is the worker's: same sizing, no retries.
	wc, err := dialWorker(r.Conn)
	if err != nil {
		return nil, err
	}
	ec := &execClient{ExecServiceClient: fsmcpv1.NewExecServiceClient(wc.cc), conn: wc, runner: r, pids: pids}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := ec.Hello(hctx, &fsmcpv1.ExecServiceHelloRequest{Version: fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1}, grpc.WaitForReady(true))
	if err != nil {
		ec.close()
		return nil, fmt.Errorf("command runner did not start: %w", err)
	}
	if resp.GetVersion() != fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1 {
		ec.close()
		return nil, fmt.Errorf("BUG(fsmcp): command runner speaks another protocol version")
	}
	ec.confinement = resp.GetConfinement()
	return ec, nil
}

// close ends the connection, which is the runner's end: it exits, its
// commands with it, and the reaper then removes the pids cgroup.
func (c *execClient) close() {
	if c != nil {
		c.conn.close()
		if c.pids != nil {
			c.pids.Release()
		}
	}
}

// exited is closed when the runner exits; nil (never ready) without one.
func (c *execClient) exited() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.runner.Exited
}

// died says which process ended the front-end: the worker or the runner.
func (c *execClient) died(w *sandbox.Worker) string {
	select {
	case <-w.Exited:
		return fmt.Sprintf("%v", w.Err())
	default:
	}
	return fmt.Sprintf("the command runner: %v", c.runner.Err())
}

// The bounds of fs_exec, as the contract fixes them.
const (
	execDefaultTimeoutS = 30
	execDefaultMaxBytes = 64 << 10
	execMaxBytes        = 1 << 20
	// execGrace is how long past a command's timeout the call waits for
	// the runner to kill it and answer.
	execGrace = 10 * time.Second
)

type execIn struct {
	Argv          []string `json:"argv" jsonschema:"the program and its arguments, never a shell string; argv[0] names a granted program by its path or base name"`
	Cwd           *string  `json:"cwd,omitempty" jsonschema:"working directory relative to the root; default the root"`
	CwdBase64     *string  `json:"cwd_base64,omitempty" jsonschema:"the working directory as base64, for names that are not UTF-8"`
	Stdin         *string  `json:"stdin,omitempty" jsonschema:"bytes for the command's standard input (default none)"`
	StdinEncoding *string  `json:"stdin_encoding,omitempty" jsonschema:"utf8 (default) or base64"`
	TimeoutS      *int64   `json:"timeout_s,omitempty" jsonschema:"seconds before the command and everything it started are killed; default 30"`
	MaxBytes      *int64   `json:"max_bytes,omitempty" jsonschema:"the most bytes of stdout and of stderr returned; default 65536, at most 1048576"`
	Grep          *string  `json:"grep,omitempty" jsonschema:"only the stdout lines matching this regular expression (ripgrep syntax) are returned"`
}

// execToolName is the command tool's name, unprefixed; the audit line of
// its calls alone carries argv and how the command ended.
const execToolName = "fs_exec"

// commandTools lists the command tools the flags turn on.
func commandTools(cfg *Config) []*tool {
	var ts []*tool
	if len(cfg.Exec.Programs) > 0 {
		ts = append(ts, execDecl(cfg).tool())
	}
	return append(ts, vcsTools(cfg)...)
}

// execDecl is fs_exec's one declaration. Its description and hints follow
// the flags: --exec-writable makes it destructive, --exec-native and
// --exec-cache change what a command may run and keep.
func execDecl(cfg *Config) toolDecl[execIn] {
	writable := cfg.Exec.Writable
	runs := "nothing beneath the root executable"
	if cfg.Exec.Native {
		runs = "what commands build may run"
	}
	if cfg.Exec.Cache != "" {
		runs += ", a persistent build cache at $FSMCP_CACHE"
	}
	return toolDecl[execIn]{
		name:  execToolName,
		title: "Run command",
		description: "Run one of the operator's granted programs (an argv, never a shell string) in a kernel " +
			"confinement: the root read-only unless the operator allowed writes, a private scratch HOME and TMPDIR, no network, " +
			runs + ". Reply: exit or signal, timed_out, duration_ms, stdout and stderr each with " +
			"its encoding (utf8 or base64) and truncated. A non-zero exit is an ordinary result.",
		hints:       hints{readOnly: !writable, destructive: writable},
		paths:       []pathDecl{onePath("cwd")},
		ownDeadline: true,
		run:         (*server).exec,
	}
}

// timeoutArg applies timeout_s's default and bound.
func (s *server) timeoutArg(v *int64) (time.Duration, error) {
	t := int64(execDefaultTimeoutS)
	if v != nil {
		t = *v
	}
	if t < 1 || t > s.cfg.Exec.MaxTimeoutS {
		return 0, invalidf("timeout_s must be between 1 and %d (--exec-max-timeout)", s.cfg.Exec.MaxTimeoutS)
	}
	return time.Duration(t) * time.Second, nil
}

// maxBytesArg applies max_bytes's default and bound.
func maxBytesArg(v *int64) (int64, error) {
	if v == nil {
		return execDefaultMaxBytes, nil
	}
	if *v < 1 || *v > execMaxBytes {
		return 0, invalidf("max_bytes must be between 1 and %d", execMaxBytes)
	}
	return *v, nil
}

func (s *server) exec(ctx context.Context, in *execIn, req *mcp.CallToolRequest) (*obj, error) {
	if len(in.Argv) == 0 {
		return nil, invalidf("argv must name a program")
	}
	cwd, err := pathArg("cwd", in.Cwd, in.CwdBase64)
	if err != nil {
		return nil, err
	}
	var stdin []byte
	if in.Stdin != nil {
		enc := "utf8"
		if in.StdinEncoding != nil {
			enc = *in.StdinEncoding
		}
		switch enc {
		case "utf8":
			stdin = []byte(*in.Stdin)
		case "base64":
			if stdin, err = base64.StdEncoding.DecodeString(*in.Stdin); err != nil {
				return nil, invalidf("stdin: not valid base64")
			}
		default:
			return nil, invalidf("stdin_encoding must be utf8 or base64")
		}
	} else if in.StdinEncoding != nil {
		return nil, invalidf("stdin_encoding without stdin")
	}
	timeout, err := s.timeoutArg(in.TimeoutS)
	if err != nil {
		return nil, err
	}
	maxBytes, err := maxBytesArg(in.MaxBytes)
	if err != nil {
		return nil, err
	}
	ereq := &fsmcpv1.ExecRequest{Argv: in.Argv, Cwd: cwd, Stdin: stdin, TimeoutMs: timeout.Milliseconds(), MaxBytes: maxBytes}
	if in.Grep != nil {
		ereq.Grep, ereq.HasGrep = *in.Grep, true
	}
	if s.cfg.Exec.Writable {
		if ereq.Protected, err = s.derivedPaths(ctx); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+execGrace)
	defer cancel()
	if req != nil && req.Params != nil && req.Params.GetProgressToken() != nil {
		ereq.CallId = strconv.FormatUint(s.ec.calls.Add(1), 10)
		defer s.execProgress(ctx, ereq.CallId, progressFunc(ctx, req))()
	}
	resp, err := s.ec.Exec(ctx, ereq)
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true)
	commandResult(doc, resp.GetResult(), true, int(s.cfg.MaxResponseBytes)-doc.size()-commandFields)
	if time.Duration(resp.GetResult().GetDurationMs())*time.Millisecond > s.cfg.CallTimeout {
		// A client that does not reset its timeout on progress gave up
		// on this call before the command ended.
		doc.bool("past_call_timeout", true)
	}
	return doc, nil
}

// execProgressEvery is how often a running command's progress is asked
// for and sent: well within the 5 s the contract allows between two
// notifications.
const execProgressEvery = 2 * time.Second

// execProgress sends a progress notification for the running command
// callID every execProgressEvery: elapsed seconds as the progress, and
// the output bytes so far in the message. The returned function stops it
// and waits for the last notification to be sent.
func (s *server) execProgress(ctx context.Context, callID string, notify func(float64, string)) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(execProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p, err := s.ec.ExecProgress(ctx, &fsmcpv1.ExecProgressRequest{CallId: callID})
			if err != nil || !p.GetRunning() {
				continue
			}
			elapsed := float64(p.GetElapsedMs()) / 1000
			notify(elapsed, fmt.Sprintf("running for %.0f s, %d bytes of output", elapsed, p.GetOutputBytes()))
		}
	}()
	return func() { close(done); <-ended }
}

// derivedPaths are the paths the worker's derived protection covers now
// (the attestation's policy.derived, which the worker refreshes for each
// Stat of the root): a writable command must leave them as they are, and
// the host may have changed a repository's configuration since the last
// call.
func (s *server) derivedPaths(ctx context.Context) ([][]byte, error) {
	st, err := s.wc.Stat(ctx, &fsmcpv1.StatRequest{Path: []byte("."), NoHash: true})
	if err != nil {
		return nil, err
	}
	if st.GetConfinement() == nil {
		return nil, fmt.Errorf("the worker attested no confinement for the root: derived protection unknown")
	}
	var paths [][]byte
	for _, d := range st.GetConfinement().GetPolicy().GetDerived() {
		paths = append(paths, []byte(d.GetPath()))
	}
	return paths, nil
}

// commandFields bounds what a command's reply holds besides its streams'
// content: exit, signal, timed_out, duration_ms, and each stream's key,
// encoding and truncated flag.
const commandFields = 320

// commandResult writes how a command ended and its streams (stderr, and
// stdout when withStdout), which share avail bytes of encoded content
// equally.
func commandResult(doc *obj, r *fsmcpv1.CommandResult, withStdout bool, avail int) {
	if r.GetExited() {
		doc.int("exit", int64(r.GetExit()))
	} else {
		doc.rawValue("exit", []byte("null"))
	}
	if r.GetSignal() != "" {
		doc.str("signal", r.GetSignal())
	} else {
		doc.rawValue("signal", []byte("null"))
	}
	doc.bool("timed_out", r.GetTimedOut()).int("duration_ms", r.GetDurationMs())
	if withStdout {
		avail /= 2
		writeStream(doc, "stdout", r.GetStdout(), r.GetStdoutTruncated(), avail)
	}
	writeStream(doc, "stderr", r.GetStderr(), r.GetStderrTruncated(), avail)
}

// writeStream writes one stream as text when its bytes are valid UTF-8,
// else as base64, judged as fs_read judges a range: a stream cut at its
// bound loses a partial last character rather than turning into base64.
func writeStream(doc *obj, key string, data []byte, truncated bool, avail int) {
	if truncated {
		data = trimPartialRune(data)
	}
	n, _, encoding := fitContent(data, avail)
	if n < len(data) {
		data, truncated = data[:n], true
	}
	doc.key(key)
	if encoding == "utf8" {
		doc.b = jsontext.AppendString(doc.b, data)
	} else {
		doc.b = append(doc.b, '"')
		doc.b = base64.StdEncoding.AppendEncode(doc.b, data)
		doc.b = append(doc.b, '"')
	}
	doc.str(key+"_encoding", encoding).bool(key+"_truncated", truncated)
}

// execConfinementDoc is the attestation of the command runner.
func execConfinementDoc(c *fsmcpv1.ExecConfinement) *obj {
	strs := func(v []string) []byte {
		b := []byte{'['}
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, s)
		}
		return append(b, ']')
	}
	return newObj().
		int("landlock_abi", int64(c.GetLandlockAbi())).
		rawValue("programs", strs(c.GetPrograms())).
		rawValue("exec_files", strs(c.GetExecFiles())).
		rawValue("read_dirs", strs(c.GetReadDirs())).
		bool("writable", c.GetWritable()).
		bool("network_denied", c.GetNetworkDenied()).
		bool("noexec_mounts", c.GetNoexecMounts()).
		str("seccomp", c.GetSeccomp()).
		int("seccomp_denied_syscalls", int64(c.GetSeccompDeniedSyscalls())).
		rawValue("namespaces", strs(c.GetNamespaces())).
		rawValue("rlimits", strs(c.GetRlimits())).
		rawValue("env", strs(c.GetEnv())).
		int("max_timeout_s", c.GetMaxTimeoutS()).
		rawValue("vcs", strs(c.GetVcs())).
		rawValue("vcs_exec_files", strs(c.GetVcsExecFiles())).
		rawValue("vcs_read_dirs", strs(c.GetVcsReadDirs())).
		object("pids", pidsDoc(c)).
		rawValue("metadata_guards", strs(c.GetMetadataGuards())).
		rawValue("selftest", selftestDoc(c.GetSelftest())).
		bool("native", c.GetNative()).
		str("cache", c.GetCache()).
		rawValue("helpers", strs(c.GetHelpers()))
}

// pidsDoc attests what bounds the tasks of all commands together.
func pidsDoc(c *fsmcpv1.ExecConfinement) *obj {
	d := newObj().str("controller", c.GetPidsController())
	if c.GetPidsController() == "none" {
		return d.str("reason", c.GetPidsNone())
	}
	return d.str("cgroup", c.GetPidsCgroup()).int("max", c.GetPidsMax())
}
