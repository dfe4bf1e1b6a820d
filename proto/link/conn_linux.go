package link

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// SocketConn checks that fd, a process's end of its socketpair, is a
// stream socket and wraps it.
func SocketConn(fd int) (net.Conn, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("--sock-fd=%d: not a socket: %w", fd, err)
	}
	if typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("--sock-fd=%d: not a stream socket", fd)
	}
	f := os.NewFile(uintptr(fd), "socket")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("--sock-fd=%d: %w", fd, err)
	}
	return conn, nil
}

// Serve serves the services register adds on conn until the peer closes
// it, with the message bounds and transport sizing Dial uses. A handler
// that panics is answered with internal, logged on stderr as who's, and
// the server carries on. opts add to the server's options; interceptors
// they chain run inside the panic recovery.
func Serve(conn net.Conn, who string, register func(*grpc.Server), opts ...grpc.ServerOption) error {
	r := recovery(who)
	srv := grpc.NewServer(append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(r.unary),
		grpc.ChainStreamInterceptor(r.stream),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		// The front-end runs at most --max-calls (≤ MaxStreams) calls at
		// once; a peer opening more waits for gRPC stream quota.
		grpc.MaxConcurrentStreams(MaxStreams),
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		grpc.ReadBufferSize(ioBufferBytes),
		grpc.WriteBufferSize(ioBufferBytes),
		// Calls run on goroutines kept between calls, whose stacks have
		// already grown: a new goroutine per call grew its stack through
		// the handler chain each time (a tenth of the worker's CPU on an
		// fs_stat). When all are busy, gRPC starts a goroutine as before.
		grpc.NumStreamWorkers(streamWorkers),
	}, opts...)...)
	register(srv)
	l := newOneConnListener(conn)
	go func() {
		<-l.connClosed
		srv.Stop()
	}()
	err := srv.Serve(l)
	if errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// recovery answers a panicking handler with internal and keeps serving;
// its string names the process in the log.
type recovery string

// Recovery is the panic recovery Serve puts around every unary call, for
// calls a server runs itself (many on one stream), logging as who's.
func Recovery(who string) grpc.UnaryServerInterceptor { return recovery(who).unary }

func (who recovery) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, who.report(info.FullMethod, r)
		}
	}()
	return h(ctx, req)
}

func (who recovery) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = who.report(info.FullMethod, r)
		}
	}()
	return h(srv, ss)
}

func (who recovery) report(method string, r any) error {
	fmt.Fprintf(os.Stderr, "%s: panic in %s: %v\n%s", string(who), method, r, debug.Stack())
	return Errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "internal error")
}

// Dial speaks gRPC over the already-connected socket conn, with the
// message bounds and transport sizing Serve uses. It never redials: once
// the socket is gone, every call fails with Unavailable. opts add to
// those (a client's interceptors).
func Dial(conn net.Conn, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	var used sync.Once
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		c := net.Conn(nil)
		used.Do(func() { c = conn })
		if c == nil {
			return nil, errors.New("the connection is gone")
		}
		return c, nil
	}
	return grpc.NewClient("passthrough:///socketpair", append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithStaticStreamWindowSize(streamWindow),
		grpc.WithStaticConnWindowSize(connWindow),
		grpc.WithReadBufferSize(ioBufferBytes),
		grpc.WithWriteBufferSize(ioBufferBytes),
		// No service config is ever fetched and no call is retried: a
		// retry would keep a copy of every request (a write's content)
		// until the call commits.
		grpc.WithDisableServiceConfig(),
		grpc.WithDisableRetry(),
	}, opts...)...)
}

// oneConnListener hands out one pre-connected conn, then blocks until
// closed. connClosed is closed when gRPC closes that conn (the peer went
// away), which ends Serve.
type oneConnListener struct {
	conns      chan net.Conn
	closed     chan struct{}
	connClosed chan struct{}
	once       sync.Once
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{conns: make(chan net.Conn, 1), closed: make(chan struct{}), connClosed: make(chan struct{})}
	l.conns <- &notifyConn{Conn: c, closed: l.connClosed}
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return sockAddr{} }

type sockAddr struct{}

func (sockAddr) Network() string { return "unix" }
func (sockAddr) String() string  { return "socketpair" }

type notifyConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *notifyConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
