package frontend

import (
	"context"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The in-process harness: the front-end the binary builds from its flags,
// over a real worker (the worker package's Service on an os.Root of the
// test's directory) served on a real socketpair, and go-sdk's client on
// in-memory transports. Nothing is confined: no Landlock, no seccomp, no
// other process but rg. Nor is the worker's start-up run (the recovery
// of an interrupted patch, the temp sweep, the self-test). What a tool
// does and answers is tested here; what needs the confinement, a crash,
// a transport or a process's lifetime is tested end to end in cmd/fsmcp.

// harness is one front-end and its worker, with a connected client.
type harness struct {
	t       *testing.T
	session *mcp.ClientSession
	// audit holds the audit lines, which the binary writes to stderr.
	audit *fronttest.SyncBuffer
}

// start serves root as fsmcp --root root flags... would, and connects a
// client. Without --state-dir the state directory is one of the test's.
func start(t *testing.T, root string, flags ...string) *harness {
	t.Helper()
	args := append([]string{"--root", root, "--state-dir", t.TempDir()}, flags...)
	audit := &fronttest.SyncBuffer{}
	cfg, _, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	wc, confinement := startWorker(t, cfg)
	log, err := openAudit(cfg.AuditLog, audit)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cfg: documentConfig(cfg), audit: log}
	srv := s.build()
	s.wc, s.confinement = wc, confinement
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-harness", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		log.close()
	})
	return &harness{t: t, session: cs, audit: audit}
}

// startWorker serves a worker as the flags configure it over a
// socketpair and returns the front-end's client of it, greeted.
func startWorker(t testing.TB, cfg *Config) (*workerClient, *fsmcpv1.Confinement) {
	t.Helper()
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		t.Fatal(err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	opts := worker.Options{
		RG:       cfg.RG,
		DevNull:  devNull,
		MaxRead:  cfg.MaxResponseBytes,
		MaxMedia: cfg.MaxMediaBytes,
		Policy:   cfg.Policy(),
		Limits: worker.Limits{MaxFileBytes: cfg.MaxFileBytes, MemoryBytes: cfg.WorkerMemory,
			MaxRG: cfg.MaxRG, MaxHeavy: cfg.MaxHeavy, QueueTimeout: cfg.QueueTimeout},
	}
	if opts.Limits.MemoryBytes == 0 {
		opts.Limits.MemoryBytes = worker.DefaultMemoryFor(sandbox.AvailableMemory())
	}
	var files []*os.File
	open := func(dir string) *os.File {
		f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		return f
	}
	if cfg.Quarantine != "" {
		if opts.Quarantine, err = worker.OpenQuarantine(open(cfg.Quarantine), cfg.QuarantineBytes); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.Rules != "" {
		if opts.Rules, err = rulesfile.Open(cfg.Rules); err != nil {
			t.Fatal(err)
		}
	}
	opts.State = open(cfg.stateSub)
	svc, err := worker.New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := fileConn(fds[0], "front-end")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := fileConn(fds[1], "worker")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		worker.Serve(theirs, svc, nil)
		close(served)
	}()
	wc, err := dialWorker(mine)
	if err != nil {
		t.Fatal(err)
	}
	// The worker goes when the front-end's connection does, as the
	// confined one exits on its socket's EOF.
	t.Cleanup(func() {
		wc.close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("the worker still serves 10 s after its connection closed")
		}
		for _, f := range append(files, devNull) {
			f.Close()
		}
		root.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	confinement, err := wc.hello(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return wc, confinement
}

// fileConn wraps a socket descriptor; the descriptor is closed either way.
func fileConn(fd int, name string) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return net.FileConn(f)
}

// call calls a tool and checks the reply's shape (fronttest.Check).
func (h *harness) call(name string, args any) fronttest.Reply {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		h.t.Fatalf("%s(%.200v): protocol error %v", name, args, err)
	}
	return fronttest.Check(h.t, name, res)
}

// wantOK fails unless the call succeeded.
func (h *harness) wantOK(name string, args any) fronttest.Reply {
	h.t.Helper()
	r := h.call(name, args)
	if r.IsError {
		h.t.Fatalf("%s(%.200v) = %.2000s, want ok", name, args, r.Text)
	}
	return r
}

// wantErr fails unless the call failed with code.
func (h *harness) wantErr(name string, args any, code string) fronttest.Reply {
	h.t.Helper()
	r := h.call(name, args)
	if !r.IsError || r.Code() != code {
		h.t.Fatalf("%s(%.200v) = %.2000s, want error %s", name, args, r.Text, code)
	}
	return r
}
