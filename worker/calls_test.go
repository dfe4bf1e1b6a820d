package worker

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/proto/callstream"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// callsWorker serves svc, with extra around every unary call, on a real
// socketpair, and returns the stream client the front-end uses, the raw
// client, and the worker's end of the socket.
func callsWorker(t *testing.T, svc *Service, extra grpc.UnaryServerInterceptor) (*callstream.Client, fsmcpv1.WorkerServiceClient, *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirsFile := os.NewFile(uintptr(fds[1]), "worker")
	mine, err := link.SocketConn(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := net.FileConn(theirsFile)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- Serve(theirs, svc, extra) }()
	cc, err := link.Dial(mine)
	if err != nil {
		t.Fatal(err)
	}
	raw := fsmcpv1.NewWorkerServiceClient(cc)
	c := callstream.New(raw)
	t.Cleanup(func() {
		c.Close()
		cc.Close()
		theirs.Close()
		<-served
		theirsFile.Close()
	})
	return c, raw, theirsFile
}

func callsService(t *testing.T, opts Options) (*Service, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s, err := New(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

// A call on the Calls stream runs through its own RPC's checks, with its
// own metadata: --rules judge it by the tool it names, a call naming no
// tool is refused, the test hook sees it as its RPC, and once the root is
// gone it is unavailable.
func TestCallsRunTheirRPCsChecks(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "rules")
	wput(t, file, "deny fs_stat secret\n")
	rules, err := rulesfile.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	svc, root := callsService(t, Options{Rules: rules})
	wput(t, filepath.Join(root, "secret"), "s")
	wput(t, filepath.Join(root, "pub"), "p")
	var mu sync.Mutex
	var seen []string
	hook := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		seen = append(seen, info.FullMethod)
		mu.Unlock()
		return h(ctx, req)
	}
	c, _, _ := callsWorker(t, svc, hook)
	tool := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(link.ToolMetadata, "fs_stat"))

	if _, err := c.Stat(tool, &fsmcpv1.StatRequest{Path: []byte("pub")}); err != nil {
		t.Fatalf("Stat(pub) on the stream: %v", err)
	}
	_, err = c.Stat(tool, &fsmcpv1.StatRequest{Path: []byte("secret")})
	if e := link.Decode(err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED || !e.PolicyViolation {
		t.Errorf("Stat(secret) on the stream under a deny line = %v, want permission_denied by policy", err)
	}
	_, err = c.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte("pub")})
	if e := link.Decode(err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL || !strings.Contains(e.Message, "names its tool") {
		t.Errorf("Stat without a tool on the stream = %v, want the refusal of a call naming no tool", err)
	}
	mu.Lock()
	// The hook runs inside the rules check, as on the RPC: the call
	// naming no tool never reached it.
	if len(seen) != 2 || seen[0] != fsmcpv1.WorkerService_Stat_FullMethodName || seen[1] != seen[0] {
		t.Errorf("the hook saw %q, want two Stat calls", seen)
	}
	mu.Unlock()

	for _, name := range []string{"secret", "pub"} {
		if err := os.Remove(filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	_, err = c.Stat(tool, &fsmcpv1.StatRequest{Path: []byte(".")})
	if e := link.Decode(err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE || !strings.Contains(e.Message, "deleted") {
		t.Errorf("Stat on the stream once the root is gone = %v, want unavailable", err)
	}
}

// A call's deadline reaches its handler, and so does its cancellation,
// as a message on the stream.
func TestCallsCancelAndDeadline(t *testing.T) {
	svc, root := callsService(t, Options{})
	wput(t, filepath.Join(root, "f"), "x")
	type saw struct {
		deadline time.Time
		err      error
	}
	entered := make(chan time.Time, 1)
	ended := make(chan saw, 1)
	hook := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		d, _ := ctx.Deadline()
		entered <- d
		<-ctx.Done()
		ended <- saw{d, ctx.Err()}
		return nil, ctx.Err()
	}
	c, _, _ := callsWorker(t, svc, hook)

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	want, _ := ctx.Deadline()
	done := make(chan error, 1)
	go func() {
		_, err := c.Stat(ctx, &fsmcpv1.StatRequest{Path: []byte("f")})
		done <- err
	}()
	select {
	case d := <-entered:
		if d.Before(want.Add(-time.Minute)) || d.After(want.Add(time.Minute)) {
			t.Errorf("the handler's deadline is %v, the caller's %v", d, want)
		}
	case err := <-done:
		t.Fatalf("the call ended before its handler ran: %v", err)
	}
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("a cancelled call returned %v", err)
	}
	select {
	case s := <-ended:
		if s.err != context.Canceled {
			t.Errorf("the handler saw %v, want the cancellation", s.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel message never reached the handler")
	}

	// A short deadline ends the handler's context in the worker.
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	go func() {
		_, err := c.Stat(ctx, &fsmcpv1.StatRequest{Path: []byte("f")})
		done <- err
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the call ended before its handler ran: %v", err)
	}
	if s := <-ended; s.err == nil {
		t.Error("the handler's context did not end at the deadline")
	}
	if err := <-done; status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a call past its deadline returned %v", err)
	}
}

// Memory a call holds for its reply is released once that call's reply
// was sent, not when the stream ends: two calls in a row that each hold
// most of the budget both succeed.
func TestCallsReleaseReplyMemoryPerCall(t *testing.T) {
	svc, root := callsService(t, Options{Limits: Limits{QueueTimeout: 300 * time.Millisecond}})
	wput(t, filepath.Join(root, "f"), "x")
	most := int64(admit.DefaultMemoryBytes-admit.MemoryReserve) * 2 / 3
	hook := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		release, err := svc.reserveReply(ctx, "test", "", most)
		if err != nil {
			return nil, err
		}
		defer release()
		return h(ctx, req)
	}
	c, _, _ := callsWorker(t, svc, hook)
	for i := range 3 {
		if _, err := c.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte("f")}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// When the worker goes away, a call waiting on the stream and the calls
// after it fail with unavailable.
func TestCallsStreamEnds(t *testing.T) {
	svc, root := callsService(t, Options{})
	wput(t, filepath.Join(root, "f"), "x")
	entered := make(chan struct{}, 1)
	hook := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c, _, theirs := callsWorker(t, svc, hook)
	done := make(chan error, 1)
	go func() {
		_, err := c.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte("f")})
		done <- err
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the call ended before its handler ran: %v", err)
	}
	// The worker's process ends: its socket closes under it.
	if err := syscall.Shutdown(int(theirs.Fd()), syscall.SHUT_RDWR); err != nil {
		t.Fatal(err)
	}
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Errorf("a call waiting when the worker went away returned %v, want unavailable", err)
	}
	_, err := c.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte("f")})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a call after the worker went away returned %v, want unavailable", err)
	}
}

// A live id reused, or a message naming no call, is a protocol error: the
// worker ends the stream.
func TestCallsStreamProtocolErrors(t *testing.T) {
	svc, root := callsService(t, Options{})
	wput(t, filepath.Join(root, "f"), "x")
	block := make(chan struct{})
	defer close(block)
	hook := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return h(ctx, req)
	}
	_, raw, _ := callsWorker(t, svc, hook)
	stat := &fsmcpv1.CallsRequest_Stat{Stat: &fsmcpv1.StatRequest{Path: []byte("f")}}
	for name, msgs := range map[string][]*fsmcpv1.CallsRequest{
		"reused id": {{Id: 1, Call: stat}, {Id: 1, Call: stat}},
		"no call":   {{Id: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			st, err := raw.Calls(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if err := st.Send(m); err != nil {
					t.Fatal(err)
				}
			}
			// The running call is cancelled, and may still reply.
			for err == nil {
				_, err = st.Recv()
			}
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("the stream ended with %v, want invalid_argument", err)
			}
		})
	}
}

// Small calls go on the Calls stream; a read or write over 64 KiB, a list
// page over 256 KiB and a read by lines keep their own RPCs.
func TestCallsStreamCarriesOnlySmallCalls(t *testing.T) {
	svc, root := callsService(t, Options{MaxRead: 1 << 20})
	wput(t, filepath.Join(root, "f"), strings.Repeat("x", 100<<10))
	var rec methodRecorder
	c := callstream.New(serveInProcess(t, svc, rec.options()...))
	t.Cleanup(c.Close)
	ctx := context.Background()
	big := make([]byte, callstream.MaxBytes+1)
	for _, step := range []struct {
		name   string
		call   func() error
		method string
	}{
		{"stat", func() error { _, err := c.Stat(ctx, &fsmcpv1.StatRequest{Path: []byte("f")}); return err }, "Calls.stat"},
		{"small read", func() error {
			_, err := c.Read(ctx, &fsmcpv1.ReadRequest{Path: []byte("f"), Length: callstream.MaxBytes})
			return err
		}, "Calls.read"},
		{"large read", func() error {
			_, err := c.Read(ctx, &fsmcpv1.ReadRequest{Path: []byte("f"), Length: callstream.MaxBytes + 1})
			return err
		}, "Read"},
		{"read by lines", func() error {
			_, err := c.Read(ctx, &fsmcpv1.ReadRequest{Path: []byte("f"), ByLine: true, Line: 1, Lines: 1, Length: 16})
			return err
		}, "Read"},
		{"page", func() error {
			_, err := c.List(ctx, &fsmcpv1.ListRequest{Path: []byte("."), MaxBytes: callstream.MaxPageBytes})
			return err
		}, "Calls.list"},
		{"large page", func() error {
			_, err := c.List(ctx, &fsmcpv1.ListRequest{Path: []byte("."), MaxBytes: callstream.MaxPageBytes + 1})
			return err
		}, "List"},
		{"small write", func() error {
			_, err := c.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("g"), Content: big[:callstream.MaxBytes], MustNotExist: true})
			return err
		}, "Calls.write"},
		{"large write", func() error {
			_, err := c.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("h"), Content: big, MustNotExist: true})
			return err
		}, "Write"},
	} {
		rec.mu.Lock()
		rec.seen = nil
		rec.mu.Unlock()
		if err := step.call(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		rec.mu.Lock()
		want := "/" + fsmcpv1.WorkerService_ServiceDesc.ServiceName + "/" + step.method
		if !rec.seen[want] {
			t.Errorf("%s went as %v, want %s", step.name, rec.seen, step.method)
		}
		rec.mu.Unlock()
	}
}

// What a call on the stream sets for its trailer (the touch log's
// eviction note) reaches the client with its reply, as its own RPC's
// trailer would, and grpc.Method names its RPC.
func TestCallsTrailer(t *testing.T) {
	svc, root := callsService(t, Options{})
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	setTrailer := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		method, _ := grpc.Method(ctx)
		grpc.SetTrailer(ctx, metadata.Pairs("x-method", method))
		return h(ctx, req)
	}
	_, raw, _ := callsWorker(t, svc, setTrailer)
	var (
		mu  sync.Mutex
		got []string
	)
	c := callstream.New(raw, callstream.WithTrailer(func(_ context.Context, md metadata.MD) {
		mu.Lock()
		got = append(got, md.Get("x-method")...)
		mu.Unlock()
	}))
	t.Cleanup(c.Close)
	if _, err := c.Stat(context.Background(), &fsmcpv1.StatRequest{Path: []byte("f")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != fsmcpv1.WorkerService_Stat_FullMethodName {
		t.Fatalf("the stream call's trailer named %q, want %q", got, fsmcpv1.WorkerService_Stat_FullMethodName)
	}
}
