package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
	"github.com/fsmcp/fsmcp/worker/internal/appendlog"
	"github.com/fsmcp/fsmcp/worker/internal/checkpoint"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
	"github.com/fsmcp/fsmcp/worker/internal/lines"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
)

// Service implements fsmcpv1.WorkerServiceServer over one *os.Root.
type Service struct {
	fsmcpv1.UnimplementedWorkerServiceServer
	root        *os.Root
	rootInfo    os.FileInfo
	confinement *fsmcpv1.Confinement
	rg          string
	devNull     *os.File
	maxRead     int64
	maxMedia    int64
	// locks serialises writes and replaces of one directory entry.
	locks pathLocks
	// rootPath is the kernel's name of the root, for realPath.
	rootPath *rootPath
	// policy is the operator's protected and denied paths.
	policy *sandbox.Matcher
	// renames is held shared by a mutation from its judgement to its
	// last system call, and exclusively by a move of a directory, which
	// changes the real path of everything beneath it.
	renames sync.RWMutex
	// links remembers protected and denied files with other names.
	links links
	// derived is what the repositories' configuration protects.
	derived derivation
	// beforeCommit, when set, runs between a write's checks and its
	// rename. Tests use it to change the file behind the worker's back.
	beforeCommit func(path string)
	// beforeDescend, when set, runs before a recursive delete opens a
	// directory. Tests use it to swap the directory for a symlink.
	beforeDescend func(name string)
	hashes        *hashcache.Cache
	lines         *lines.Index
	budgets       budgets
	// procs switches between one processor and all (procs.go); nil
	// outside the worker process.
	procs  *procs
	limits admit.Limits
	// quarantine, when set, keeps what deletes remove and writes replace.
	quarantine *Quarantine
	// rules, when set, are the operator's --rules, for Check and for
	// every call (callrules.go).
	rules *rulesfile.File
	// state, when set, is the state directory that holds the patch
	// journals (recover.go); rootDev and rootIno are the root's identity
	// they record.
	state            *os.File
	rootDev, rootIno uint64
	// cps, with a quarantine and a state directory, holds the
	// checkpoints and the touch log (rewind.go).
	cps *checkpoint.Store
	// appends are the append journal's slots (append.go).
	appends appendlog.Slots
}

var _ fsmcpv1.WorkerServiceServer = (*Service)(nil)

// Options configures a Service.
type Options struct {
	// Confinement is reported by Hello and by Stat of the root.
	Confinement *fsmcpv1.Confinement
	// RG is the absolute path of ripgrep.
	RG string
	// DevNull is an open /dev/null, the stdin of rg children (a confined
	// worker cannot open it itself).
	DevNull *os.File
	// MaxRead bounds the bytes one Read returns.
	MaxRead int64
	// MaxMedia bounds the file one View returns.
	MaxMedia int64
	// Policy is the operator's protected and denied paths.
	Policy sandbox.Policy
	// Limits are the worker's budgets; zero fields take defaults.
	Limits admit.Limits
	// Quarantine, when set, keeps what deletes remove and writes replace,
	// for Undo.
	Quarantine *Quarantine
	// Rules, when set, are the operator's --rules, for Check.
	Rules *rulesfile.File
	// State is the state directory for fs_patch's journals, outside the
	// root; without it, fs_patch is unavailable.
	State *os.File
}

// New returns a Service over root.
func New(root *os.Root, opts Options) (*Service, error) {
	fi, err := root.Lstat(".")
	if err != nil {
		return nil, fmt.Errorf("lstat root: %w", err)
	}
	rst, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("lstat root: no device and inode")
	}
	if opts.MaxRead <= 0 {
		opts.MaxRead = 1 << 20
	}
	if opts.MaxMedia <= 0 {
		opts.MaxMedia = 5 << 20
	}
	if err := opts.Limits.Check(link.MaxMessageBytes); err != nil {
		return nil, err
	}
	if opts.Confinement == nil {
		opts.Confinement = &fsmcpv1.Confinement{Seccomp: "none"}
	}
	pol, err := opts.Policy.Compile()
	if err != nil {
		return nil, err
	}
	opts.Confinement.Policy = &fsmcpv1.Policy{Protect: opts.Policy.Protect, Deny: opts.Policy.Deny}
	rp, err := newRootPath(root)
	if err != nil {
		return nil, fmt.Errorf("name the root through /proc/self/fd: %w", err)
	}
	var cps *checkpoint.Store
	if opts.Quarantine != nil && opts.State != nil {
		if err := opts.Quarantine.persist(int(opts.State.Fd()), uint64(rst.Dev), rst.Ino); err != nil {
			return nil, err
		}
		if cps, err = checkpoint.OpenStore(int(opts.State.Fd())); err != nil {
			return nil, err
		}
	}
	return &Service{
		cps:         cps,
		rootPath:    rp,
		policy:      pol,
		root:        root,
		rootInfo:    fi,
		confinement: opts.Confinement,
		rg:          opts.RG,
		devNull:     opts.DevNull,
		maxRead:     opts.MaxRead,
		maxMedia:    opts.MaxMedia,
		hashes:      hashcache.New(),
		lines:       lines.NewIndex(),
		budgets:     newBudgets(opts.Limits),
		limits:      opts.Limits,
		quarantine:  opts.Quarantine,
		rules:       opts.Rules,
		state:       opts.State,
		rootDev:     uint64(rst.Dev),
		rootIno:     rst.Ino,
	}, nil
}

// Hello implements fsmcpv1.WorkerServiceServer.
func (s *Service) Hello(ctx context.Context, req *fsmcpv1.HelloRequest) (*fsmcpv1.HelloResponse, error) {
	if req.GetVersion() != fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1 {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "",
			"protocol version %v, want %v", req.GetVersion(), fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1)
	}
	return &fsmcpv1.HelloResponse{Version: fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1, Confinement: s.confinement}, nil
}
