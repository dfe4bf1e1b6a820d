package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/workertest"
)

// goTreeService serves $GOROOT/src, unconfined, in this process, with rg.
func goTreeService(b *testing.B) fsmcpv1.WorkerServiceClient {
	src := filepath.Join(runtime.GOROOT(), "src")
	root, err := os.OpenRoot(src)
	if err != nil {
		b.Skip("no Go tree: ", err)
	}
	b.Cleanup(func() { root.Close() })
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("no rg: ", err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devNull.Close() })
	s, err := New(root, Options{RG: rg, DevNull: devNull})
	if err != nil {
		b.Fatal(err)
	}
	return serveInProcess(b, s)
}

// BenchmarkWalkTreeGoTree is one Tree RPC of $GOROOT/src, depth 16, one
// 64 KiB page (the default reply bound), through an in-process gRPC connection.
func BenchmarkWalkTreeGoTree(b *testing.B) {
	c := goTreeService(b)
	for b.Loop() {
		if _, err := workertest.Drain(c.Tree(context.Background(), &fsmcpv1.TreeRequest{MaxDepth: 16, MaxBytes: 64 << 10})); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWalkGrepGoTree is one Grep RPC ("func Benchmark") of
// $GOROOT/src, one 1 MiB page, through an in-process gRPC connection.
func BenchmarkWalkGrepGoTree(b *testing.B) {
	c := goTreeService(b)
	for b.Loop() {
		if _, err := workertest.Drain(c.Grep(context.Background(), &fsmcpv1.GrepRequest{Pattern: "func Benchmark", MaxBytes: 1 << 20})); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWalkGlobGoTree is one Glob RPC ("**/*.go") of $GOROOT/src, one
// 1 MiB page, through an in-process gRPC connection.
func BenchmarkWalkGlobGoTree(b *testing.B) {
	c := goTreeService(b)
	for b.Loop() {
		if _, err := workertest.Drain(c.Glob(context.Background(), &fsmcpv1.GlobRequest{Pattern: "**/*.go", MaxBytes: 1 << 20})); err != nil {
			b.Fatal(err)
		}
	}
}
