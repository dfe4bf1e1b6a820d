package worker

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/grpc"
)

// withProcs sets GOMAXPROCS to 1 for the test, as newProcs does, and
// gives it back after.
func withProcs(t *testing.T) *procs {
	t.Helper()
	was := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	return &procs{small: 1, all: 2}
}

// Holds nest: the process has every processor from the first hold to
// the last release, and one again after; a release called twice counts
// once.
func TestProcsHold(t *testing.T) {
	p := withProcs(t)
	a := p.hold()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("held: GOMAXPROCS %d, want 2", got)
	}
	b := p.hold()
	a()
	a()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("one of two holds released (twice): GOMAXPROCS %d, want 2", got)
	}
	b()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("all released: GOMAXPROCS %d, want 1", got)
	}
	var nilProcs *procs
	nilProcs.hold()()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("a Service without procs changed GOMAXPROCS to %d", got)
	}
}

// As Serve wires it: a small call on the Calls stream runs on one
// processor, though the stream itself stays open, and so does a unary
// read of a small file; a list page on the stream, another unary RPC and
// a heavy slot run on all; after them, one again.
func TestProcsServe(t *testing.T) {
	svc, root := callsService(t, Options{})
	svc.procs = withProcs(t)
	wput(t, filepath.Join(root, "f"), "x")
	var mu sync.Mutex
	seen := map[string]int{}
	hook := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		seen[info.FullMethod] = runtime.GOMAXPROCS(0)
		mu.Unlock()
		return h(ctx, req)
	}
	c, raw, _ := callsWorker(t, svc, hook)
	ctx := context.Background()
	if _, err := c.Stat(ctx, &fsmcpv1.StatRequest{Path: []byte("f"), NoHash: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, &fsmcpv1.ListRequest{Path: []byte("."), MaxBytes: 4096}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	// A read asking for a large page keeps its RPC, and stays small.
	if _, err := raw.Read(ctx, &fsmcpv1.ReadRequest{Path: []byte("f"), Length: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	release, err := svc.heavy(ctx, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	heavy := runtime.GOMAXPROCS(0)
	release()
	mu.Lock()
	defer mu.Unlock()
	for method, want := range map[string]int{
		fsmcpv1.WorkerService_Stat_FullMethodName:  1,
		fsmcpv1.WorkerService_List_FullMethodName:  2,
		fsmcpv1.WorkerService_Mkdir_FullMethodName: 2,
		fsmcpv1.WorkerService_Read_FullMethodName:  1,
	} {
		if got, ok := seen[method]; !ok || got != want {
			t.Errorf("%s ran with GOMAXPROCS %d (seen %v), want %d", method, got, ok, want)
		}
	}
	if heavy != 2 {
		t.Errorf("a heavy slot held GOMAXPROCS %d, want 2", heavy)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("after the calls, GOMAXPROCS %d, want 1", got)
	}
}
