package worker

import (
	"context"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The escape table against a worker served in this process over a real
// socketpair, with no Landlock and no seccomp: os.Root alone must hold.
func TestConformanceInProcess(t *testing.T) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Fatal(err)
	}
	workertest.RunAll(t, func(t *testing.T, dir string) fsmcpv1.WorkerServiceClient {
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { devNull.Close() })
		s, err := New(root, Options{RG: rg, DevNull: devNull, MaxRead: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		mine, _ := net.FileConn(os.NewFile(uintptr(fds[0]), "client"))
		theirs, _ := net.FileConn(os.NewFile(uintptr(fds[1]), "server"))
		go Serve(theirs, s, nil)
		cc, err := grpc.NewClient("passthrough:///worker", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return mine, nil }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return fsmcpv1.NewWorkerServiceClient(cc)
	})
}
