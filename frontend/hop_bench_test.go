package frontend

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// BenchmarkHop compares the two shapes a small worker call can take over
// the socketpair. Both run on fsmcp's own gRPC ends (dialWorker and
// link.Serve: windows, buffers, message bounds, stream workers,
// panic recovery, the reply-release stats handler) and carry the same
// 100-byte request and reply as raw bytes, so only the shape differs:
//
//	unary        one RPC per call: an HTTP/2 stream opened and closed,
//	             headers encoded and decoded, a handoff on either side
//	stream       one long-lived bidirectional stream; a call is a message
//	             carrying an id and the time it has left, a reply carries
//	             the id back, and a caller that gives up sends a cancel
//	             message; one goroutine sends, one receives
//	stream-locked  the same, each caller sending under a lock: one
//	             handoff fewer per call
//	stat-unary   the worker's Stat of a 4 KiB file as the RPC it is today
//	             (worker.Serve, with its root and rules interceptors)
//	stat-stream  the same Stat behind the stream, without them
//
// Each runs with one call in flight (serial) and with eight (parallel8).
// Both ends run in this process, so cpu-ns/op is the CPU of both per
// call, read from getrusage around the run. p50-ns is the median call's
// latency and calls/s the throughput over the run's wall time.
func BenchmarkHop(b *testing.B) {
	ctx := context.Background()
	echo := func(_ context.Context, in []byte) ([]byte, error) { return in, nil }
	call := func(r hopCaller) func(context.Context, uint64) error {
		return func(ctx context.Context, n uint64) error {
			req := make([]byte, 100)
			binary.LittleEndian.PutUint64(req, n)
			got, err := r(ctx, req)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, req) {
				return fmt.Errorf("call %d: got another call's reply", n)
			}
			return nil
		}
	}

	wc := hopConn(b, func(srv *grpc.Server) { srv.RegisterService(&hopService, &hopServer{handle: echo}) })
	unary := func(ctx context.Context, req []byte) ([]byte, error) {
		var reply []byte
		err := wc.cc.Invoke(ctx, hopUnaryMethod, req, &reply, grpc.ForceCodecV2(hopCodec{}))
		return reply, err
	}
	hs, err := openHopStream(ctx, wc.cc, false)
	if err != nil {
		b.Fatal(err)
	}
	defer hs.close()
	locked, err := openHopStream(ctx, wc.cc, true)
	if err != nil {
		b.Fatal(err)
	}
	defer locked.close()

	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f4k"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	// The hash cache takes only files that have settled.
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(filepath.Join(root, "f4k"), old, old); err != nil {
		b.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	svc, err := worker.New(r, worker.Options{MaxRead: 262144})
	if err != nil {
		b.Fatal(err)
	}
	mine, theirs := hopSocketpair(b)
	served := make(chan error, 1)
	go func() { served <- worker.Serve(theirs, svc, nil) }()
	statWC, err := dialWorker(mine)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { statWC.close(); <-served }()
	statReq := &fsmcpv1.StatRequest{Path: []byte("f4k")}
	statRPC := fsmcpv1.NewWorkerServiceClient(statWC.cc)
	statUnary := func(ctx context.Context, _ uint64) error {
		_, err := statRPC.Stat(ctx, statReq)
		return err
	}
	stat := func(ctx context.Context, in []byte) ([]byte, error) {
		var req fsmcpv1.StatRequest
		if err := proto.Unmarshal(in, &req); err != nil {
			return nil, err
		}
		resp, err := svc.Stat(ctx, &req)
		if err != nil {
			return nil, err
		}
		return proto.Marshal(resp)
	}
	statConn := hopConn(b, func(srv *grpc.Server) { srv.RegisterService(&hopService, &hopServer{handle: stat}) })
	ss, err := openHopStream(ctx, statConn.cc, false)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.close()
	statBytes, err := proto.Marshal(statReq)
	if err != nil {
		b.Fatal(err)
	}
	statStream := func(ctx context.Context, _ uint64) error {
		reply, err := ss.call(ctx, statBytes)
		if err != nil {
			return err
		}
		var resp fsmcpv1.StatResponse
		return proto.Unmarshal(reply, &resp)
	}

	for _, c := range []struct {
		name string
		call func(context.Context, uint64) error
	}{
		{"unary", call(unary)},
		{"stream", call(hs.call)},
		{"stream-locked", call(locked.call)},
		{"stat-unary", statUnary},
		{"stat-stream", statStream},
	} {
		b.Run(c.name+"/serial", func(b *testing.B) { hopMeasure(b, 1, c.call) })
		b.Run(c.name+"/parallel8", func(b *testing.B) { hopMeasure(b, 8, c.call) })
	}
}

// TestHopStreamCancel checks that the stream prototype carries what an
// RPC's headers carry: a caller's cancellation reaches the handler's
// context, and so does its deadline.
func TestHopStreamCancel(t *testing.T) {
	for _, locked := range []bool{false, true} {
		t.Run(fmt.Sprintf("locked=%v", locked), func(t *testing.T) { testHopStreamCancel(t, locked) })
	}
}

func testHopStreamCancel(t *testing.T, locked bool) {
	seen := make(chan error, 1)
	deadlines := make(chan time.Time, 1)
	wait := func(ctx context.Context, _ []byte) ([]byte, error) {
		d, _ := ctx.Deadline()
		deadlines <- d
		<-ctx.Done()
		seen <- ctx.Err()
		return nil, ctx.Err()
	}
	wc := hopConn(t, func(srv *grpc.Server) { srv.RegisterService(&hopService, &hopServer{handle: wait}) })
	hs, err := openHopStream(context.Background(), wc.cc, locked)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.close()
	done := make(chan error, 1)
	handlerGot := func() time.Time {
		select {
		case d := <-deadlines:
			return d
		case err := <-done:
			t.Fatalf("the call ended before its handler ran: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the handler never ran")
		}
		return time.Time{}
	}
	handlerSaw := func() error {
		select {
		case err := <-seen:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's context was never ended")
			return nil
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := hs.call(ctx, []byte("x"))
		done <- err
	}()
	if d := handlerGot(); !d.IsZero() {
		t.Errorf("a call without a deadline got %v", d)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call returned %v", err)
	}
	if err := handlerSaw(); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler saw %v, want the cancellation", err)
	}

	// The handler's deadline is the caller's, give or take the time the
	// call spent on the way. Whichever end's timer fires first ends the
	// handler's context: its own deadline or the caller's cancel message.
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	go func() {
		_, err := hs.call(ctx, []byte("x"))
		done <- err
	}()
	if d := handlerGot(); d.Before(want.Add(-time.Second)) || d.After(want.Add(time.Second)) {
		t.Errorf("the handler's deadline is %v, the caller's %v", d, want)
	}
	if err := handlerSaw(); err == nil {
		t.Error("the handler's context did not end")
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("call past its deadline returned %v", err)
	}
}

// hopMeasure runs b.N calls, inFlight at a time, and reports the CPU per
// call, the median latency and the calls per second.
func hopMeasure(b *testing.B, inFlight int, call func(context.Context, uint64) error) {
	lat := make([][]time.Duration, inFlight)
	errs := make([]error, inFlight)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := hopCPU(b)
	t0 := time.Now()
	for g := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, b.N/inFlight+1)
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				// A tool call always has a deadline (--call-timeout).
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				s := time.Now()
				err := call(ctx, uint64(n))
				d := time.Since(s)
				cancel()
				if err != nil {
					errs[g] = err
					return
				}
				mine = append(mine, d)
			}
			lat[g] = mine
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	cpu := hopCPU(b) - cpu0
	b.StopTimer()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(b.N)/wall.Seconds(), "calls/s")
}

// hopCPU is the user and system CPU this process has used, in ns.
func hopCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func hopSocketpair(tb testing.TB) (mine, theirs net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	for i, c := range []*net.Conn{&mine, &theirs} {
		f := os.NewFile(uintptr(fds[i]), "hop")
		*c, err = net.FileConn(f)
		f.Close()
		if err != nil {
			tb.Fatal(err)
		}
	}
	return mine, theirs
}

// hopConn serves register's services with link.Serve on one end of
// a socketpair and dials the other as the front-end dials the worker.
func hopConn(tb testing.TB, register func(*grpc.Server)) *workerClient {
	mine, theirs := hopSocketpair(tb)
	served := make(chan error, 1)
	go func() { served <- link.Serve(theirs, "fsmcp worker", register) }()
	wc, err := dialWorker(mine)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		wc.close()
		if err := <-served; err != nil {
			tb.Error(err)
		}
	})
	return wc
}

// hopCodec carries a message's bytes as they are.
type hopCodec struct{}

func (hopCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("hop codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (hopCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("hop codec: cannot unmarshal into %T", v)
	}
	*p = data.Materialize()
	return nil
}

func (hopCodec) Name() string { return "fsmcp-hop" }

// The server finds a codec by the call's content-subtype.
func init() { encoding.RegisterCodecV2(hopCodec{}) }

const (
	hopUnaryMethod  = "/fsmcp.bench.Hop/Call"
	hopStreamMethod = "/fsmcp.bench.Hop/Calls"
)

// hopService is the prototype's service: Call, one RPC per call, and
// Calls, one stream for many.
var hopService = grpc.ServiceDesc{
	ServiceName: "fsmcp.bench.Hop",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Call", Handler: hopUnaryHandler}},
	Streams: []grpc.StreamDesc{{StreamName: "Calls", ServerStreams: true, ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error { return srv.(*hopServer).serve(stream) }}},
}

type hopServer struct {
	handle func(context.Context, []byte) ([]byte, error)
}

func hopUnaryHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	var in []byte
	if err := dec(&in); err != nil {
		return nil, err
	}
	h := srv.(*hopServer)
	if interceptor == nil {
		return h.handle(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: hopUnaryMethod}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) { return h.handle(ctx, req.([]byte)) })
}

// A frame on the stream: kind, call id, the nanoseconds the call has left
// (0: no deadline; the two ends share a clock, but a duration, as in
// grpc-timeout, does not need them to), then the request or reply.
const (
	hopCallFrame   = 1
	hopCancelFrame = 2
	hopReplyFrame  = 3
	hopFailFrame   = 4 // the reply is the status code's byte and message
	hopHeaderBytes = 1 + 8 + 8
)

func hopFrame(kind byte, id uint64, left time.Duration, body []byte) []byte {
	f := make([]byte, hopHeaderBytes, hopHeaderBytes+len(body))
	f[0] = kind
	binary.LittleEndian.PutUint64(f[1:], id)
	binary.LittleEndian.PutUint64(f[9:], uint64(left))
	return append(f, body...)
}

// serve answers the calls on one stream, each on its own goroutine in
// its own context, until the client closes its side; then it cancels
// the calls still running and waits for them.
func (h *hopServer) serve(stream grpc.ServerStream) error {
	var (
		mu     sync.Mutex
		live   = map[uint64]context.CancelFunc{}
		sendMu sync.Mutex
		wg     sync.WaitGroup
	)
	defer func() {
		mu.Lock()
		for _, cancel := range live {
			cancel()
		}
		mu.Unlock()
		wg.Wait()
	}()
	base := stream.Context()
	for {
		var f []byte
		if err := stream.RecvMsg(&f); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if len(f) < hopHeaderBytes {
			return status.Error(codes.InvalidArgument, "short frame")
		}
		id := binary.LittleEndian.Uint64(f[1:])
		switch f[0] {
		case hopCancelFrame:
			// A cancel follows its call on the stream: the call is
			// running or has already replied.
			mu.Lock()
			if cancel := live[id]; cancel != nil {
				cancel()
			}
			mu.Unlock()
		case hopCallFrame:
			ctx, cancel := context.WithCancel(base)
			if left := time.Duration(binary.LittleEndian.Uint64(f[9:])); left != 0 {
				ctx, cancel = context.WithTimeout(base, left)
			}
			mu.Lock()
			live[id] = cancel
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := h.handle(ctx, f[hopHeaderBytes:])
				mu.Lock()
				delete(live, id)
				mu.Unlock()
				cancel()
				reply := hopFrame(hopReplyFrame, id, 0, out)
				if err != nil {
					st, ok := status.FromError(err)
					if !ok {
						st = status.FromContextError(err)
					}
					reply = hopFrame(hopFailFrame, id, 0, append([]byte{byte(st.Code())}, st.Message()...))
				}
				sendMu.Lock()
				// A failed send ends the stream, which the client sees.
				_ = stream.SendMsg(reply)
				sendMu.Unlock()
			}()
		default:
			return status.Errorf(codes.InvalidArgument, "frame kind %d", f[0])
		}
	}
}

type hopCaller func(context.Context, []byte) ([]byte, error)

type hopResult struct {
	reply []byte
	err   error
}

// hopStream is the client side of one Calls stream: callers register an
// id and hand their frame to the one sender goroutine (or, locked, send
// it themselves under a lock); the one receiver goroutine hands each
// reply to the caller waiting on its id.
type hopStream struct {
	stream grpc.ClientStream
	locked bool
	sendMu sync.Mutex
	send   chan []byte
	quit   chan struct{}
	done   chan struct{} // closed when the receiver has ended

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan hopResult // nil once the stream has ended
	err     error                     // why it ended
}

func openHopStream(ctx context.Context, cc *grpc.ClientConn, locked bool) (*hopStream, error) {
	st, err := cc.NewStream(ctx, &hopService.Streams[0], hopStreamMethod, grpc.ForceCodecV2(hopCodec{}))
	if err != nil {
		return nil, err
	}
	s := &hopStream{stream: st, locked: locked, send: make(chan []byte), quit: make(chan struct{}), done: make(chan struct{}),
		pending: map[uint64]chan hopResult{}}
	if !locked {
		go s.sender()
	}
	go s.receiver()
	return s, nil
}

func (s *hopStream) sender() {
	for {
		select {
		case f := <-s.send:
			if s.stream.SendMsg(f) != nil {
				// The receiver gets the stream's status.
				return
			}
		case <-s.quit:
			s.stream.CloseSend()
			return
		case <-s.done:
			return
		}
	}
}

func (s *hopStream) receiver() {
	defer close(s.done)
	for {
		var f []byte
		err := s.stream.RecvMsg(&f)
		if err == nil && len(f) < hopHeaderBytes {
			err = errors.New("short frame")
		}
		if err != nil {
			if err == io.EOF {
				err = status.Error(codes.Unavailable, "the call stream has ended")
			}
			s.mu.Lock()
			s.pending, s.err = nil, err
			s.mu.Unlock()
			return
		}
		id := binary.LittleEndian.Uint64(f[1:])
		s.mu.Lock()
		ch := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if ch == nil {
			// Its caller gave up.
			continue
		}
		r := hopResult{reply: f[hopHeaderBytes:]}
		if f[0] == hopFailFrame && len(f) > hopHeaderBytes {
			r = hopResult{err: status.Error(codes.Code(f[hopHeaderBytes]), string(f[hopHeaderBytes+1:]))}
		}
		ch <- r
	}
}

func (s *hopStream) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *hopStream) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// call sends req as one call on the stream and waits for its reply. The
// context's deadline travels with the call; if the context ends first,
// a cancel message follows it.
func (s *hopStream) call(ctx context.Context, req []byte) ([]byte, error) {
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		if left = time.Until(d); left <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	ch := make(chan hopResult, 1)
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return nil, s.ended()
	}
	s.next++
	id := s.next
	s.pending[id] = ch
	s.mu.Unlock()
	if err := s.put(ctx, hopFrame(hopCallFrame, id, left, req)); err != nil {
		s.forget(id)
		return nil, err
	}
	select {
	case r := <-ch:
		return r.reply, r.err
	case <-s.done:
		return nil, s.ended()
	case <-ctx.Done():
		s.forget(id)
		// Sent whatever the caller's context: the server must hear it.
		_ = s.put(context.Background(), hopFrame(hopCancelFrame, id, 0, nil))
		return nil, ctx.Err()
	}
}

// put sends a frame: through the sender goroutine, or, when the stream
// is locked, itself under the lock.
func (s *hopStream) put(ctx context.Context, f []byte) error {
	if s.locked {
		s.sendMu.Lock()
		err := s.stream.SendMsg(f)
		s.sendMu.Unlock()
		if err != nil {
			// The stream has ended; the receiver gets its status.
			<-s.done
			return s.ended()
		}
		return nil
	}
	select {
	case s.send <- f:
		return nil
	case <-s.done:
		return s.ended()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends the client's side and waits for the server to end the
// stream.
func (s *hopStream) close() {
	if s.locked {
		s.sendMu.Lock()
		s.stream.CloseSend()
		s.sendMu.Unlock()
	} else {
		close(s.quit)
	}
	<-s.done
}
