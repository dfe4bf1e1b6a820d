package link

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// hello answers Hello with what its func returns.
type hello struct {
	fsmcpv1.UnimplementedWorkerServiceServer
	answer func() (*fsmcpv1.HelloResponse, error)
}

func (h *hello) Hello(context.Context, *fsmcpv1.HelloRequest) (*fsmcpv1.HelloResponse, error) {
	return h.answer()
}

// serve serves h with Serve on one end of a real socketpair and dials the
// other with Dial. Cleanup closes the client and checks that Serve ended
// without error once its peer was gone.
func serve(t *testing.T, h *hello, opts ...grpc.ServerOption) fsmcpv1.WorkerServiceClient {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := SocketConn(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	ours, err := SocketConn(fds[1])
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- Serve(theirs, "link test", func(srv *grpc.Server) { fsmcpv1.RegisterWorkerServiceServer(srv, h) }, opts...)
	}()
	cc, err := Dial(ours)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve = %v after its peer closed", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not end after its peer closed")
		}
	})
	return fsmcpv1.NewWorkerServiceClient(cc)
}

// A handler that panics is answered with internal, and the server goes on
// serving the next call.
func TestServeRecoversPanic(t *testing.T) {
	calls := 0
	c := serve(t, &hello{answer: func() (*fsmcpv1.HelloResponse, error) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return &fsmcpv1.HelloResponse{Version: fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1}, nil
	}})
	_, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{}, grpc.WaitForReady(true))
	if e := Decode(err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL {
		t.Fatalf("a panicking handler answered %v, want internal", err)
	}
	resp, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{})
	if err != nil || resp.GetVersion() != fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1 {
		t.Fatalf("the call after a panic = %v, %v", resp, err)
	}
}

// Interceptors given to Serve run inside its panic recovery.
func TestServeInterceptorsInsideRecovery(t *testing.T) {
	c := serve(t, &hello{answer: func() (*fsmcpv1.HelloResponse, error) { return &fsmcpv1.HelloResponse{}, nil }},
		grpc.ChainUnaryInterceptor(func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
			panic("interceptor")
		}))
	_, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{}, grpc.WaitForReady(true))
	if e := Decode(err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL {
		t.Fatalf("a panicking interceptor answered %v, want internal", err)
	}
}

// A message past MaxMessageBytes is refused on the sending side, and the
// connection carries on.
func TestDialBoundsMessages(t *testing.T) {
	c := serve(t, &hello{answer: func() (*fsmcpv1.HelloResponse, error) { return &fsmcpv1.HelloResponse{}, nil }})
	big := &fsmcpv1.HelloRequest{}
	big.ProtoReflect().SetUnknown(make([]byte, MaxMessageBytes+1))
	_, err := c.Hello(context.Background(), big, grpc.WaitForReady(true))
	if e := Decode(err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE {
		t.Fatalf("a message of %d bytes = %v, want too_large", MaxMessageBytes+1, err)
	}
	if _, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{}); err != nil {
		t.Fatalf("the call after a refused message: %v", err)
	}
}

// SocketConn takes a stream socket only.
func TestSocketConnRefuses(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := SocketConn(int(f.Fd())); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("SocketConn(a file) = %v, want not a socket", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := SocketConn(fds[0]); err == nil || !strings.Contains(err.Error(), "not a stream socket") {
		t.Errorf("SocketConn(a datagram socket) = %v, want not a stream socket", err)
	}
}

// Once the socket is gone, a call fails as unavailable: Dial never
// redials.
func TestDialNeverRedials(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := SocketConn(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	ours, err := SocketConn(fds[1])
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- Serve(theirs, "link test", func(srv *grpc.Server) {
			fsmcpv1.RegisterWorkerServiceServer(srv, &hello{answer: func() (*fsmcpv1.HelloResponse, error) { return &fsmcpv1.HelloResponse{}, nil }})
		})
	}()
	cc, err := Dial(ours)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := fsmcpv1.NewWorkerServiceClient(cc)
	if _, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v after its socket closed", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, err := c.Hello(ctx, &fsmcpv1.HelloRequest{})
		e := Decode(err)
		if e.Code == fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE {
			return
		}
		if err == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("a call after the socket closed = %v, want unavailable", err)
		}
	}
}
