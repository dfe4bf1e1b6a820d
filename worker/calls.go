package worker

import (
	"context"
	"io"
	"sync"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
	"github.com/fsmcp/fsmcp/worker/internal/runners"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The Calls stream carries small calls (a stat, a list page, a read or
// write of at most 64 KiB), each tagged with an id, on one long-lived
// stream: a unary RPC opens an HTTP/2 stream, encodes and decodes
// headers and hands off between goroutines on both ends, which cost
// more than the call itself (docs/design/hop.md).
//
// The stream is transport only. Each call runs through the interceptors
// its own RPC runs through (panic recovery, the root check, --rules,
// a test's hook), with its own metadata, deadline and reply hold, so no
// check has a second copy and none is skipped.

// served is the worker service as Serve registers it: Service, whose
// Calls dispatches each call through checks.
type served struct {
	*Service
	// checks are the unary RPCs' interceptors, chained.
	checks grpc.UnaryServerInterceptor
}

// chainUnary runs ics in order around a handler, as
// grpc.ChainUnaryInterceptor does.
func chainUnary(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		var next func(int, context.Context, any) (any, error)
		next = func(i int, ctx context.Context, req any) (any, error) {
			if i == len(ics) {
				return h(ctx, req)
			}
			return ics[i](ctx, req, info, func(ctx context.Context, req any) (any, error) { return next(i+1, ctx, req) })
		}
		return next(0, ctx, req)
	}
}

// Calls implements fsmcpv1.WorkerServiceServer. It runs each call on a
// goroutine of its own, at most link.MaxStreams at once (beyond that it
// stops reading, and flow control holds the front-end back), in a context
// derived from the stream's: a cancel message or the stream's end
// cancels it. A reused live id or a message naming no call is a bug of
// the front-end, and ends the stream with invalid_argument.
//
// The goroutines outlive their calls (internal/runners): a new goroutine's
// stack grows, copied, through the interceptors and the handler on every
// call, which cost a sixth of a small call's CPU.
func (s served) Calls(stream grpc.BidiStreamingServer[fsmcpv1.CallsRequest, fsmcpv1.CallsResponse]) error {
	var (
		mu     sync.Mutex
		live   = map[uint64]context.CancelFunc{}
		sendMu sync.Mutex
		wg     sync.WaitGroup
		slots  = make(chan struct{}, link.MaxStreams)
		run    = runners.New()
	)
	defer func() {
		mu.Lock()
		for _, cancel := range live {
			cancel()
		}
		mu.Unlock()
		wg.Wait()
		run.Stop()
	}()
	base := stream.Context()
	for {
		select {
		case slots <- struct{}{}:
		case <-base.Done():
			return status.FromContextError(base.Err()).Err()
		}
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		id := req.GetId()
		if req.GetCancel() {
			// A cancel follows its call: the call is running or has
			// already replied.
			mu.Lock()
			if cancel := live[id]; cancel != nil {
				cancel()
			}
			mu.Unlock()
			<-slots
			continue
		}
		if req.GetCall() == nil {
			return status.Errorf(codes.InvalidArgument, "call %d names no call", id)
		}
		ctx, cancel := context.WithCancel(base)
		if left := req.GetTimeLeftNanos(); left != 0 {
			ctx, cancel = context.WithTimeout(base, time.Duration(left))
		}
		mu.Lock()
		if _, dup := live[id]; dup {
			mu.Unlock()
			cancel()
			return status.Errorf(codes.InvalidArgument, "call %d is already running", id)
		}
		live[id] = cancel
		mu.Unlock()
		// The call sees its own metadata only, never the stream's.
		md := metadata.MD{}
		for _, m := range req.GetMetadata() {
			md.Append(m.GetKey(), string(m.GetValue()))
		}
		ctx, release := admit.Hold(metadata.NewIncomingContext(ctx, md))
		wg.Add(1)
		run.Do(func() {
			defer wg.Done()
			reply := s.call(ctx, req)
			reply.Id = id
			mu.Lock()
			delete(live, id)
			mu.Unlock()
			cancel()
			sendMu.Lock()
			// A failed send ends the stream, which Recv reports.
			_ = stream.Send(reply)
			sendMu.Unlock()
			// The reply was encoded and handed to the transport.
			release()
			<-slots
		})
	}
}

// call runs one call through its RPC's interceptors and handler. What it
// sets for its trailer goes in its reply.
func (s served) call(ctx context.Context, req *fsmcpv1.CallsRequest) *fsmcpv1.CallsResponse {
	tr := &callTransport{}
	out := s.reply(grpc.NewContextWithServerTransportStream(ctx, tr), tr, req)
	tr.mu.Lock()
	for k, vs := range tr.trailer {
		for _, v := range vs {
			out.Trailer = append(out.Trailer, &fsmcpv1.CallMetadata{Key: k, Value: []byte(v)})
		}
	}
	tr.mu.Unlock()
	return out
}

// callTransport stands in for a call's own gRPC stream: grpc.Method
// names its RPC, and what it sets with grpc.SetTrailer is kept for its
// reply. A call on the stream sends no headers of its own; what it sets
// for them is dropped, as the unary RPCs set none.
type callTransport struct {
	method  string
	mu      sync.Mutex
	trailer metadata.MD
}

func (t *callTransport) Method() string                  { return t.method }
func (t *callTransport) SetHeader(md metadata.MD) error  { return nil }
func (t *callTransport) SendHeader(md metadata.MD) error { return nil }
func (t *callTransport) SetTrailer(md metadata.MD) error {
	t.mu.Lock()
	t.trailer = metadata.Join(t.trailer, md)
	t.mu.Unlock()
	return nil
}

// reply runs the call on its handler.
func (s served) reply(ctx context.Context, tr *callTransport, req *fsmcpv1.CallsRequest) *fsmcpv1.CallsResponse {
	switch c := req.GetCall().(type) {
	case *fsmcpv1.CallsRequest_Stat:
		out, e := dispatch(s, ctx, tr, fsmcpv1.WorkerService_Stat_FullMethodName, c.Stat, s.Service.Stat)
		if e == nil {
			return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Stat{Stat: out}}
		}
		return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Error{Error: e}}
	case *fsmcpv1.CallsRequest_List:
		// A page of thousands of entries is not a small call: the
		// calls beside it keep a processor of their own (procs.go).
		defer s.procs.hold()()
		out, e := dispatch(s, ctx, tr, fsmcpv1.WorkerService_List_FullMethodName, c.List, s.Service.List)
		if e == nil {
			return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_List{List: out}}
		}
		return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Error{Error: e}}
	case *fsmcpv1.CallsRequest_Read:
		out, e := dispatch(s, ctx, tr, fsmcpv1.WorkerService_Read_FullMethodName, c.Read, s.Service.Read)
		if e == nil {
			return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Read{Read: out}}
		}
		return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Error{Error: e}}
	case *fsmcpv1.CallsRequest_Write:
		out, e := dispatch(s, ctx, tr, fsmcpv1.WorkerService_Write_FullMethodName, c.Write, s.Service.Write)
		if e == nil {
			return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Write{Write: out}}
		}
		return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Error{Error: e}}
	}
	return &fsmcpv1.CallsResponse{Reply: &fsmcpv1.CallsResponse_Error{Error: link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "an unknown call").Detail()}}
}

// dispatch runs h on req as the unary RPC method would run: inside its
// interceptors. A failure is the error detail the RPC's status would
// carry.
func dispatch[Req, Resp any](s served, ctx context.Context, tr *callTransport, method string, req Req, h func(context.Context, Req) (Resp, error)) (Resp, *fsmcpv1.Error) {
	tr.method = method
	info := &grpc.UnaryServerInfo{Server: s, FullMethod: method}
	out, err := s.checks(ctx, req, info, func(ctx context.Context, r any) (any, error) { return h(ctx, r.(Req)) })
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			// As gRPC answers a unary handler's context error.
			err = status.FromContextError(err).Err()
		}
		var zero Resp
		return zero, link.Decode(err).Detail()
	}
	return out.(Resp), nil
}
