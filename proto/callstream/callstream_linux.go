package callstream

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MaxBytes bounds the content a read or write on the stream carries: a
// larger one keeps its own RPC, so that no one message holds up the
// others on the stream's shared window.
const MaxBytes = 64 << 10

// MaxPageBytes bounds the page a list on the stream asks for: a default
// page (262144 bytes) goes on the stream.
const MaxPageBytes = 256 << 10

// Client is a worker client whose Stat, List, Read and Write send small
// calls on the Calls stream; every other call, and a call with call
// options, is its own RPC. The stream is opened on the first call. When
// it ends, the calls waiting on it fail with its status (unavailable if
// the worker went away), and the next call opens a new one.
type Client struct {
	fsmcpv1.WorkerServiceClient
	mu     sync.Mutex
	s      *stream // nil before the first call and after the stream ended
	closed bool
	// trailer, when set, is given each stream call's trailer.
	trailer func(context.Context, metadata.MD)
}

// Option configures a Client.
type Option func(*Client)

// WithTrailer gives f the trailer a call on the stream set (a unary
// interceptor's grpc.Trailer sees only the calls that are their own
// RPCs), with the call's context.
func WithTrailer(f func(ctx context.Context, md metadata.MD)) Option {
	return func(c *Client) { c.trailer = f }
}

// New returns a Client over c.
func New(c fsmcpv1.WorkerServiceClient, opts ...Option) *Client {
	cl := &Client{WorkerServiceClient: c}
	for _, o := range opts {
		o(cl)
	}
	return cl
}

// Close ends the stream, if one is open, and waits for it to end; a call
// after Close is its own RPC.
func (c *Client) Close() {
	c.mu.Lock()
	s := c.s
	c.s, c.closed = nil, true
	c.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// Stat implements fsmcpv1.WorkerServiceClient.
func (c *Client) Stat(ctx context.Context, req *fsmcpv1.StatRequest, opts ...grpc.CallOption) (*fsmcpv1.StatResponse, error) {
	if len(opts) > 0 {
		return c.WorkerServiceClient.Stat(ctx, req, opts...)
	}
	r, err := c.call(ctx, &fsmcpv1.CallsRequest{Call: &fsmcpv1.CallsRequest_Stat{Stat: req}})
	return reply(r, err, (*fsmcpv1.CallsResponse).GetStat)
}

// List implements fsmcpv1.WorkerServiceClient.
func (c *Client) List(ctx context.Context, req *fsmcpv1.ListRequest, opts ...grpc.CallOption) (*fsmcpv1.ListResponse, error) {
	if len(opts) > 0 || req.GetMaxBytes() <= 0 || req.GetMaxBytes() > MaxPageBytes {
		return c.WorkerServiceClient.List(ctx, req, opts...)
	}
	r, err := c.call(ctx, &fsmcpv1.CallsRequest{Call: &fsmcpv1.CallsRequest_List{List: req}})
	return reply(r, err, (*fsmcpv1.CallsResponse).GetList)
}

// Read implements fsmcpv1.WorkerServiceClient. A read by lines has no
// bound on its reply's bytes, and keeps its RPC.
func (c *Client) Read(ctx context.Context, req *fsmcpv1.ReadRequest, opts ...grpc.CallOption) (*fsmcpv1.ReadResponse, error) {
	if len(opts) > 0 || req.GetByLine() || req.GetLength() <= 0 || req.GetLength() > MaxBytes {
		return c.WorkerServiceClient.Read(ctx, req, opts...)
	}
	r, err := c.call(ctx, &fsmcpv1.CallsRequest{Call: &fsmcpv1.CallsRequest_Read{Read: req}})
	return reply(r, err, (*fsmcpv1.CallsResponse).GetRead)
}

// Write implements fsmcpv1.WorkerServiceClient.
func (c *Client) Write(ctx context.Context, req *fsmcpv1.WriteRequest, opts ...grpc.CallOption) (*fsmcpv1.WriteResponse, error) {
	if len(opts) > 0 || len(req.GetContent()) > MaxBytes {
		return c.WorkerServiceClient.Write(ctx, req, opts...)
	}
	r, err := c.call(ctx, &fsmcpv1.CallsRequest{Call: &fsmcpv1.CallsRequest_Write{Write: req}})
	return reply(r, err, (*fsmcpv1.CallsResponse).GetWrite)
}

// reply is r's reply of the call's kind, or its error.
func reply[T any](r *fsmcpv1.CallsResponse, err error, get func(*fsmcpv1.CallsResponse) *T) (*T, error) {
	if err != nil {
		return nil, err
	}
	if e := r.GetError(); e != nil {
		return nil, link.FromDetail(e)
	}
	if out := get(r); out != nil {
		return out, nil
	}
	return nil, status.Errorf(codes.Internal, "the worker answered call %d with another kind of reply", r.GetId())
}

// call sends req on the stream and waits for its reply.
func (c *Client) call(ctx context.Context, req *fsmcpv1.CallsRequest) (*fsmcpv1.CallsResponse, error) {
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			return nil, status.FromContextError(context.DeadlineExceeded).Err()
		}
		req.TimeLeftNanos = int64(left)
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		for k, vs := range md {
			for _, v := range vs {
				req.Metadata = append(req.Metadata, &fsmcpv1.CallMetadata{Key: k, Value: []byte(v)})
			}
		}
	}
	s, err := c.stream()
	if err != nil {
		return nil, err
	}
	r, err := s.call(ctx, req)
	if err == nil && r.GetError() != nil {
		// A failure at or past the call's deadline (the worker's timer
		// may fire before the context's here) is answered as a unary
		// call's would be, by the context.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return nil, status.FromContextError(context.DeadlineExceeded).Err()
		}
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if err == nil && len(r.GetTrailer()) > 0 && c.trailer != nil {
		md := metadata.MD{}
		for _, m := range r.GetTrailer() {
			md.Append(m.GetKey(), string(m.GetValue()))
		}
		c.trailer(ctx, md)
	}
	return r, err
}

// stream is the open stream, opened if there is none.
func (c *Client) stream() (*stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, status.Error(codes.Unavailable, "the worker client is closed")
	}
	if c.s != nil {
		select {
		case <-c.s.done:
			c.s = nil
		default:
			return c.s, nil
		}
	}
	s, err := open(c.WorkerServiceClient)
	if err != nil {
		return nil, err
	}
	c.s = s
	return s, nil
}

// stream is one Calls stream. Callers register an id and hand their
// message to the one sender goroutine; the one receiver goroutine hands
// each reply to the caller waiting on its id.
type stream struct {
	st     grpc.BidiStreamingClient[fsmcpv1.CallsRequest, fsmcpv1.CallsResponse]
	end    context.CancelFunc
	send   chan *fsmcpv1.CallsRequest
	quit   chan struct{}
	done   chan struct{} // closed when the receiver has ended
	closer sync.Once

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan *fsmcpv1.CallsResponse // nil once the stream has ended
	err     error                                  // why it ended
}

func open(c fsmcpv1.WorkerServiceClient) (*stream, error) {
	ctx, end := context.WithCancel(context.Background())
	st, err := c.Calls(ctx)
	if err != nil {
		end()
		return nil, err
	}
	s := &stream{st: st, end: end, send: make(chan *fsmcpv1.CallsRequest), quit: make(chan struct{}), done: make(chan struct{}),
		pending: map[uint64]chan *fsmcpv1.CallsResponse{}}
	go s.sender()
	go s.receiver()
	return s, nil
}

func (s *stream) sender() {
	for {
		select {
		case m := <-s.send:
			if s.st.Send(m) != nil {
				// The receiver gets the stream's status.
				return
			}
		case <-s.quit:
			s.st.CloseSend()
			return
		case <-s.done:
			return
		}
	}
}

func (s *stream) receiver() {
	defer close(s.done)
	defer s.end()
	for {
		r, err := s.st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "the worker ended the call stream")
			}
			s.mu.Lock()
			s.pending, s.err = nil, err
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		ch := s.pending[r.GetId()]
		delete(s.pending, r.GetId())
		s.mu.Unlock()
		// A reply nobody waits for is one its caller gave up on.
		if ch != nil {
			ch <- r
		}
	}
}

func (s *stream) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *stream) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// call sends req as one call and waits for its reply. If ctx ends first,
// a cancel message follows the call.
func (s *stream) call(ctx context.Context, req *fsmcpv1.CallsRequest) (*fsmcpv1.CallsResponse, error) {
	ch := make(chan *fsmcpv1.CallsResponse, 1)
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return nil, s.ended()
	}
	s.next++
	id := s.next
	s.pending[id] = ch
	s.mu.Unlock()
	req.Id = id
	if err := s.put(ctx, req); err != nil {
		s.forget(id)
		return nil, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-s.done:
		// The reply may have arrived just before the end.
		select {
		case r := <-ch:
			return r, nil
		default:
		}
		return nil, s.ended()
	case <-ctx.Done():
		s.forget(id)
		// Sent whatever the caller's context: the worker must hear it.
		_ = s.put(context.Background(), &fsmcpv1.CallsRequest{Id: id, Cancel: true})
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// put hands m to the sender goroutine.
func (s *stream) put(ctx context.Context, m *fsmcpv1.CallsRequest) error {
	select {
	case s.send <- m:
		return nil
	case <-s.done:
		return s.ended()
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// close ends the front-end's side, waits for the worker to end the
// stream (its running calls are cancelled), and gives up after a while.
func (s *stream) close() {
	s.closer.Do(func() { close(s.quit) })
	select {
	case <-s.done:
	case <-time.After(closeWait):
		s.end()
		<-s.done
	}
}

// closeWait is how long close waits for the worker to end the stream.
const closeWait = 5 * time.Second
