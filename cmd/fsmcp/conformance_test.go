package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The escape table against the real worker: this test binary re-exec'd as
// __worker, confined with Landlock and seccomp, spoken to directly over
// its socketpair with no front-end in between.
func TestConformanceConfinedWorker(t *testing.T) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Fatal(err)
	}
	workertest.RunAll(t, func(t *testing.T, root string) fsmcpv1.WorkerServiceClient {
		w, err := sandbox.StartWorker(os.Args[0], sandbox.WorkerConfig{Root: root, RG: rg, MaxRead: 1 << 16,
			Quarantine: workertest.QuarantineDir(root), QuarantineBytes: 1 << 20, Rules: workertest.RulesFile(root)}, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			w.Conn.Close()
			select {
			case <-w.Exited:
			case <-time.After(10 * time.Second):
				t.Error("the worker did not exit on EOF")
			}
		})
		cc, err := grpc.NewClient("passthrough:///worker", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return w.Conn, nil }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		c := fsmcpv1.NewWorkerServiceClient(cc)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hello, err := c.Hello(ctx, &fsmcpv1.HelloRequest{Version: fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		if conf := hello.GetConfinement(); conf.GetLandlockAbi() < 1 || conf.GetSeccomp() != "filter" {
			t.Fatalf("the worker is not confined: %v", conf)
		}
		return c
	})
}
