package worker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
	"github.com/fsmcp/fsmcp/worker/internal/selftest"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// Hooks lets a test binary run code at fixed points of the worker's
// start-up. Production passes the zero value.
type Hooks struct {
	// Confined runs after the worker confined itself, before it serves.
	Confined func(*os.Root)
	// Interceptor wraps every unary RPC, inside panic recovery.
	Interceptor grpc.UnaryServerInterceptor
	// SelftestOutside, given the root's name and the path outside it
	// that the self-test would open, returns the path to open instead.
	SelftestOutside func(root, outside string) string
}

// Main runs the worker with the arguments that follow
// sandbox.WorkerSubcommand and returns the exit code.
func Main(args []string, hooks Hooks) int {
	if err := run(args, hooks); err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp worker: %v\n", err)
		return 1
	}
	return 0
}

func run(args []string, hooks Hooks) error {
	start := time.Now()
	cfg, err := sandbox.ParseWorkerConfig(args)
	if err != nil {
		return err
	}
	// Start-up order: inherited descriptors, socket, root, rg, Landlock,
	// seccomp, serve. Both confinements come before the first RPC is read.
	// The worker expects only stdin, stdout, stderr and its socket; any
	// other descriptor it inherited (the front-end closes what it was
	// given, so this is the second line) is closed before anything is
	// opened, so neither it nor rg can use one Landlock would not allow.
	if n, err := sandbox.CloseInherited(3, cfg.SockFD); err != nil {
		return err
	} else if n > 0 && cfg.Verbose {
		fmt.Fprintf(os.Stderr, "fsmcp worker: closed %d inherited descriptors\n", n)
	}
	conn, err := link.SocketConn(cfg.SockFD)
	if err != nil {
		return err
	}
	// Open the root once, O_PATH, and reach it only through this
	// descriptor: os.OpenRoot and the Landlock rule both use
	// /proc/self/fd/N, so a --root symlink swapped meanwhile cannot make
	// them name different directories.
	rootFD, err := unix.Open(cfg.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open root: %w", err)
	}
	fdPath := fmt.Sprintf("/proc/self/fd/%d", rootFD)
	root, err := os.OpenRoot(fdPath)
	if err != nil {
		return fmt.Errorf("open root: %w", err)
	}
	rgVersion, err := rgVersion(cfg.RG)
	if err != nil {
		return err
	}
	rgFiles, err := sandbox.ExecDeps(cfg.RG)
	if err != nil {
		return fmt.Errorf("resolve rg's libraries: %w", err)
	}
	// A confined worker cannot open /dev/null: open it now for rg's stdin.
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	// The self-test execs the worker's own binary, which it is not
	// granted.
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("name the worker's executable: %w", err)
	}
	// The memory budget's default depends on what the machine and the
	// cgroup give, which the confined worker can no longer read.
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = DefaultMemoryFor(sandbox.AvailableMemory())
	}
	// The quarantine, like the root, is opened once and granted to
	// Landlock through its descriptor.
	var quarantine *Quarantine
	var grants []sandbox.Grant
	if cfg.Quarantine != "" {
		qf, err := os.OpenFile(cfg.Quarantine, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("open quarantine: %w", err)
		}
		if quarantine, err = OpenQuarantine(qf, cfg.QuarantineBytes); err != nil {
			return err
		}
		grants = append(grants, sandbox.Grant{Path: fmt.Sprintf("/proc/self/fd/%d", quarantine.Fd()), What: "quarantine", LikeRoot: true})
	}
	// The state directory, which holds fs_patch's journals, likewise:
	// with the root's rights, so that recovery can move a journal an
	// earlier version left in the root out of it.
	var state *os.File
	if cfg.StateDir != "" {
		if state, err = os.OpenFile(cfg.StateDir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0); err != nil {
			return fmt.Errorf("open the state directory: %w", err)
		}
		grants = append(grants, sandbox.Grant{Path: fmt.Sprintf("/proc/self/fd/%d", state.Fd()), What: "state", LikeRoot: true})
	}
	// The rules file is read, and read again when it changes, by a
	// process of its own, started before the worker confines itself and
	// confined to that file's directory: the worker is granted nothing
	// there.
	var rules *rulesfile.File
	if cfg.Rules != "" {
		if rules, err = rulesfile.Start(exe, cfg.Rules, cfg.AllowNoLandlock); err != nil {
			return err
		}
	}
	st, err := sandbox.ConfineWorker(fdPath, cfg.ReadOnly, rgFiles, grants...)
	switch {
	case errors.Is(err, sandbox.ErrNoLandlock) && cfg.AllowNoLandlock:
		fmt.Fprintln(os.Stderr, "fsmcp worker: WARNING: no Landlock: only os.Root stands between the client and the host")
	case err != nil:
		return err
	case cfg.Verbose:
		fmt.Fprintf(os.Stderr, "fsmcp worker: landlock ABI %d (kernel %d), rules: %s\n",
			st.ABI, st.KernelABI, strings.Join(st.Rules, "; "))
	}
	unix.Close(rootFD)
	// The seccomp filter closes what Landlock leaves open (new sockets of
	// any kind, metadata changes by path, ptrace, namespaces). It comes
	// after Landlock, once the worker's socket and files are open, and
	// before the first RPC; rg inherits it.
	sc, err := sandbox.FilterWorker()
	switch {
	case errors.Is(err, sandbox.ErrNoSeccomp) && cfg.AllowNoLandlock:
		fmt.Fprintf(os.Stderr, "fsmcp worker: WARNING: %v: new sockets and metadata changes by path are not refused\n", err)
	case err != nil:
		return err
	case cfg.Verbose:
		fmt.Fprintf(os.Stderr, "fsmcp worker: seccomp filter: %d system calls refused, non-dumpable, no_new_privs\n", sc.Denied)
	}
	if hooks.Confined != nil {
		hooks.Confined(root)
	}
	conf := &fsmcpv1.Confinement{
		JournalOutsideRoot:    state != nil,
		LandlockAbi:           int32(st.ABI),
		KernelLandlockAbi:     int32(st.KernelABI),
		ReadOnlyEnforced:      st.ABI > 0 && st.ReadOnly,
		NetworkDenied:         st.NetworkDenied,
		RgVersion:             rgVersion,
		Seccomp:               sc.Mode,
		SeccompDeniedSyscalls: int32(sc.Denied),
	}
	svc, err := New(root, Options{
		Confinement: conf,
		RG:          cfg.RG,
		DevNull:     devNull,
		MaxRead:     cfg.MaxRead,
		MaxMedia:    cfg.MaxMedia,
		Policy:      cfg.Policy,
		Limits: admit.Limits{MaxFileBytes: cfg.MaxFileBytes, MemoryBytes: cfg.MemoryBytes,
			MaxRG: cfg.MaxRG, MaxHeavy: cfg.MaxHeavy, QueueTimeout: cfg.QueueTimeout},
		Quarantine: quarantine,
		Rules:      rules,
		State:      state,
	})
	if err != nil {
		return err
	}
	rootName := *svc.rootPath.name.Load()
	outside := selftest.OutsidePath(rootName)
	if hooks.SelftestOutside != nil {
		outside = hooks.SelftestOutside(rootName, outside)
	}
	conf.Selftest, err = selftest.Run(selftest.Config{
		Outside: outside, Exe: exe, DevNull: devNull,
		FSEnforced:      st.ABI > 0,
		NetEnforced:     sc.Mode == "filter" || st.NetworkDenied,
		SeccompEnforced: sc.Mode == "filter",
	})
	if err != nil {
		return err
	}
	// The soft memory limit is the budget's capacity: the collector works
	// harder only as the worker nears what it admitted, which reservations
	// keep below the limit.
	debug.SetMemoryLimit(svc.limits.MemoryBytes)
	// A patch a crash interrupted is undone before the first RPC, so no
	// call ever sees it half applied; the sweep then removes what is left.
	// Journals set aside go to the front-end, for the audit.
	var r *Recovery
	if cfg.ReadOnly {
		r, err = svc.checkReadOnly()
	} else {
		r, err = svc.recoverJournals(cfg.DiscardJournal)
	}
	if err != nil {
		return err
	}
	if r.Undone > 0 {
		fmt.Fprintf(os.Stderr, "fsmcp worker: undid %d patch(es) a crash interrupted\n", r.Undone)
	}
	for _, a := range r.SetAside {
		conf.JournalsSetAside = append(conf.JournalsSetAside, &fsmcpv1.SetAsideJournal{Name: a.Name, Reason: a.Reason})
	}
	svc.procs = newProcs()
	// The walk runs beside the first calls with every processor, as any
	// call that is not small does (procs.go).
	sweep := func(temp bool) {
		release := svc.procs.hold()
		go func() {
			defer release()
			sweepTemp(svc, start, temp)
		}()
	}
	if !cfg.ReadOnly {
		sweep(true)
	}
	if cfg.ReadOnly && (!svc.policy.Empty() || rules != nil) {
		// Nothing to sweep, but the walk shows the policy the other
		// names of protected and denied files (links.go).
		sweep(false)
	}
	return Serve(conn, svc, hooks.Interceptor)
}

// who names the worker in the log of a panic.
const who = "fsmcp worker"

func rgVersion(rg string) (string, error) {
	out, err := exec.Command(rg, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("run %s --version: %w", rg, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first), nil
}

// Serve serves svc on conn until the peer closes it. extra, when set,
// wraps every unary RPC inside panic recovery.
func Serve(conn net.Conn, svc *Service, extra grpc.UnaryServerInterceptor) error {
	// Every call of the worker service first checks that the root still
	// exists (rootgone.go).
	// Then, with --rules, each call gets its rule context (callrules.go).
	// Last, a change's record in the touch log (rewind.go).
	unary := []grpc.UnaryServerInterceptor{svc.rootUnary, svc.rulesUnary, svc.touchUnary}
	if extra != nil {
		unary = append(unary, extra)
	}
	// A call on the Calls stream runs through the same chain, inside the
	// panic recovery link.Serve gives every unary RPC (calls.go).
	calls := served{Service: svc, checks: chainUnary(append([]grpc.UnaryServerInterceptor{link.Recovery(who)}, unary...)...)}
	// Every other RPC has every processor while it runs (procs.go).
	return link.Serve(conn, who, func(srv *grpc.Server) { fsmcpv1.RegisterWorkerServiceServer(srv, calls) },
		grpc.ChainUnaryInterceptor(append([]grpc.UnaryServerInterceptor{svc.procs.unary}, unary...)...),
		grpc.ChainStreamInterceptor(svc.procs.stream, svc.rootStream, svc.rulesStream),
		// Memory reserved for a reply is released once it was sent.
		grpc.StatsHandler(admit.ReleaseAfterReply{}))
}
