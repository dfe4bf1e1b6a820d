package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the fsmcp release.
const Version = "0.1.0"

// minGo is the oldest Go release whose os.Root has every escape fix fsmcp
// relies on (1.24.3, 1.26.1, 1.26.5) and a working MkdirAll (1.26.8).
var minGo = [3]int{1, 26, 8}

// Hooks lets a test binary inject faults into the front-end. Production
// passes the zero value.
type Hooks struct {
	// WrapTool wraps the handler of the named tool.
	WrapTool func(name string, h mcp.ToolHandler) mcp.ToolHandler
}

// Main runs the front-end with the command line args (without the program
// name) and returns the exit code. It serves MCP on stdin and stdout.
func Main(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer, hooks Hooks) int {
	cfg, fs, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fsmcp: %v (see --help)\n", err)
		return 2
	}
	switch {
	case cfg.Help:
		fs.Usage()
		return 0
	case cfg.Version:
		fmt.Fprintf(stdout, "fsmcp %s (%s)\n%s\nkernel landlock ABI %d\n", Version, runtime.Version(), buildText(), sandbox.KernelABI())
		return 0
	case cfg.ToolHelp:
		if err := cfg.checkTools(); err != nil {
			fmt.Fprintf(stderr, "fsmcp: %v\n", err)
			return 2
		}
		writeToolHelp(stdout, cfg)
		return 0
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintf(stderr, "fsmcp: %v\n", err)
		return 2
	}
	if err := checkGoVersion(runtime.Version()); err != nil {
		fmt.Fprintf(stderr, "fsmcp: %v\n", err)
		return 2
	}
	if sandbox.KernelABI() == 0 && !cfg.AllowNoLandlock {
		fmt.Fprintln(stderr, "fsmcp: the kernel does not support Landlock; refusing to start (--allow-no-landlock overrides)")
		return 2
	}
	if err := serve(ctx, cfg, hooks, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "fsmcp: %v\n", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg *Config, hooks Hooks, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	tuneGC(cfg)
	// The audit log, and for HTTP the listener and token, come first:
	// once confined, the front-end can neither open nor bind.
	ep, err := prepare(cfg, stderr)
	if err != nil {
		return err
	}
	defer ep.close()
	// The MCP server (every tool's schema and handler) is built while the
	// worker starts: it needs nothing of the worker until a call arrives.
	var conn *stdioConn
	if ep.http == nil {
		conn = newStdioConn(stdin, stdout)
		conn.structured = cfg.StructuredContent
	}
	s := &server{cfg: documentConfig(cfg), wrap: hooks.WrapTool, audit: ep.audit, stdio: conn}
	built := make(chan *mcp.Server, 1)
	go func() { built <- s.build() }()
	// The worker is this same binary, so both ends are one build.
	w, err := sandbox.StartWorker("/proc/self/exe", sandbox.WorkerConfig{
		Root:            cfg.Root,
		RG:              cfg.RG,
		ReadOnly:        cfg.ReadOnly,
		AllowNoLandlock: cfg.AllowNoLandlock,
		MaxRead:         cfg.MaxResponseBytes,
		MaxMedia:        cfg.MaxMediaBytes,
		Policy:          cfg.Policy(),
		MaxFileBytes:    cfg.MaxFileBytes,
		MemoryBytes:     cfg.WorkerMemory,
		MaxRG:           cfg.MaxRG,
		MaxHeavy:        cfg.MaxHeavy,
		QueueTimeout:    cfg.QueueTimeout,
		Quarantine:      cfg.Quarantine,
		QuarantineBytes: cfg.QuarantineBytes,
		Rules:           cfg.Rules,
		StateDir:        cfg.stateSub,
		DiscardJournal:  cfg.DiscardJournal,
		Verbose:         cfg.Verbose,
	}, stderr)
	if err != nil {
		return err
	}
	wc, err := dialWorker(w.Conn)
	if err != nil {
		return err
	}
	defer wc.close()
	if ep.http != nil {
		ep.http.health = func(ctx context.Context) error { _, err := wc.hello(ctx); return err }
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	confinement, err := wc.hello(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("worker did not start: %w", err)
	}
	auditSetAside(ep.audit, cfg.stateSub, confinement.GetJournalsSetAside())
	// The command runner, when commands are on, is started now too: it
	// needs namespaces and files the confined front-end could not give.
	ec, err := startExec(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer ec.close()
	// Landlock is inherited and one-way: from here on the front-end can
	// open no file, and so could never start a more privileged worker.
	if st, err := sandbox.ConfineFrontend(); err != nil {
		if !errors.Is(err, sandbox.ErrNoLandlock) || !cfg.AllowNoLandlock {
			return err
		}
		fmt.Fprintln(stderr, "fsmcp: WARNING: no Landlock: only os.Root stands between the client and the host")
	} else if cfg.Verbose {
		fmt.Fprintf(stderr, "fsmcp: front-end confined: landlock ABI %d, %s\n", st.ABI, strings.Join(st.Rules, "; "))
	}
	// Every socket the front-end will use exists now (stdio has none,
	// HTTP its listener), and the worker is started: refuse new sockets,
	// exec, ptrace and the rest for good.
	if sc, err := sandbox.FilterFrontend(ep.http != nil); err != nil {
		if !errors.Is(err, sandbox.ErrNoSeccomp) || !cfg.AllowNoLandlock {
			return err
		}
		fmt.Fprintf(stderr, "fsmcp: WARNING: %v: the front-end can still open sockets\n", err)
	} else if cfg.Verbose {
		fmt.Fprintf(stderr, "fsmcp: front-end seccomp filter: %d system calls refused\n", sc.Denied)
	}

	srv := <-built
	s.wc, s.ec, s.confinement = wc, ec, confinement
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var workerDied atomic.Bool
	go func() {
		select {
		case <-w.Exited:
			workerDied.Store(true)
			stop(errors.New("the worker exited"))
		case <-ec.exited():
			workerDied.Store(true)
			stop(errors.New("the command runner exited"))
		case <-runCtx.Done():
		}
	}()
	if ep.http == nil {
		fmt.Fprintln(stderr, readyLine(cfg, "stdio"))
	}
	// Serving returns on stdin EOF (stdio), on a signal (ctx), or when the
	// worker died; in every case calls in flight answer first.
	err = ep.serve(runCtx, srv, conn, stderr)
	if workerDied.Load() {
		return fmt.Errorf("worker exited unexpectedly (%v)", ec.died(w))
	}
	// Closing the connection is the worker's EOF: it exits. Should it not,
	// the kernel kills it when this process exits (Pdeathsig).
	wc.close()
	select {
	case <-w.Exited:
	case <-time.After(2 * time.Second):
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// The front-end's garbage collector settings. Its live heap is small (a
// few MiB), but every call allocates transient memory: the go-sdk's JSON
// decoding alone takes over 200 KB per call, and a page is copied several
// times on its way out. With the default GOGC=100 the collector ran every
// ten or twenty calls and took about a quarter of the front-end's CPU on
// fs_stat; at 400 it runs a quarter as often, for some MiB more heap. The
// soft memory limit keeps the heap from growing past what the calls in
// flight (at most --max-calls, each holding a few copies of a page) and,
// over HTTP, the sessions kept (at most --http-max-sessions) need,
// whatever GOGC allows. A limit sized for one page in flight made the
// collector run ten times as often at 256 HTTP sessions and cut
// throughput to a quarter (BenchmarkContactHTTPSessions). A request whose content alone exceeds
// it (a write of tens of MiB) keeps the collector running through that
// call, at up to half the CPU. GOGC or GOMEMLIMIT in the environment take
// precedence: the operator knows the machine and its writes.
const (
	frontendGCPercent  = 400
	frontendMemoryBase = 16 << 20
	// frontendPageCopies is how many copies of one page a call may hold
	// at once: the worker's reply, the document, its string, the
	// go-sdk's encodings, the stdio write.
	frontendPageCopies = 8
	// frontendSessionBytes is what one HTTP session holds while idle
	// (go-sdk's session and stream state, with room to spare).
	frontendSessionBytes = 16 << 10
)

func tuneGC(cfg *Config) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(frontendGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(frontendMemoryLimit(cfg))
	}
}

// frontendMemoryLimit is the soft memory limit for cfg: the base, the
// pages of the calls that may be in flight, and the HTTP sessions kept.
func frontendMemoryLimit(cfg *Config) int64 {
	limit := int64(frontendMemoryBase) + int64(max(cfg.MaxCalls, 1))*frontendPageCopies*cfg.MaxResponseBytes
	if cfg.Transport == "http" {
		limit += int64(cfg.HTTPMaxSessions) * frontendSessionBytes
	}
	return limit
}

// buildText describes the build from the information the Go toolchain
// embeds: the main module's path and version, and the VCS revision, its
// time and whether the tree had uncommitted changes.
func buildText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "build information unavailable"
	}
	text := "module " + bi.Main.Path + " " + bi.Main.Version
	setting := map[string]string{}
	for _, s := range bi.Settings {
		setting[s.Key] = s.Value
	}
	rev := setting["vcs.revision"]
	if rev == "" {
		return text + ", revision unknown"
	}
	text += ", revision " + rev
	if t := setting["vcs.time"]; t != "" {
		text += " (" + t + ")"
	}
	if setting["vcs.modified"] == "true" {
		text += ", modified"
	}
	return text
}

var goRelease = regexp.MustCompile(`^go(\d+)\.(\d+)(?:\.(\d+))?`)

func checkGoVersion(v string) error {
	m := goRelease.FindStringSubmatch(v)
	if m == nil {
		return nil // a development build: no release number to compare
	}
	var got [3]int
	for i := range got {
		got[i], _ = strconv.Atoi(m[i+1])
	}
	for i := range got {
		if got[i] != minGo[i] {
			if got[i] < minGo[i] {
				return fmt.Errorf("built with %s; os.Root needs go%d.%d.%d or newer", v, minGo[0], minGo[1], minGo[2])
			}
			return nil
		}
	}
	return nil
}
