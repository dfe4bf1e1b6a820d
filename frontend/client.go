package frontend

import (
	"context"
	"errors"
	"net"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// maxMessageBytes matches the worker's bound on one gRPC message.
const maxMessageBytes = 128 << 20

// The transport's sizing, the same on both ends (worker.Serve): a stream
// window holds a default page (262144 bytes) and its framing whole, the
// connection's a few of them, and one read or write system call moves
// up to 64 KiB.
const (
	streamWindow  = 1 << 20
	connWindow    = 4 << 20
	ioBufferBytes = 64 << 10
)

// workerClient is the front-end's gRPC connection to the worker.
type workerClient struct {
	fsmcpv1.WorkerServiceClient
	cc   *grpc.ClientConn
	once sync.Once
}

// dialWorker speaks gRPC over the already-connected socket. It never
// redials: once the socket is gone, every call fails with Unavailable.
func dialWorker(conn net.Conn) (*workerClient, error) {
	var used sync.Once
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		c := net.Conn(nil)
		used.Do(func() { c = conn })
		if c == nil {
			return nil, errors.New("the worker connection is gone")
		}
		return c, nil
	}
	cc, err := grpc.NewClient("passthrough:///worker",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		// One peer on a socketpair: static flow-control windows large
		// enough for a default page end the BDP pings and mid-message
		// window updates, each an extra wake-up of both processes.
		grpc.WithStaticStreamWindowSize(streamWindow),
		grpc.WithStaticConnWindowSize(connWindow),
		grpc.WithReadBufferSize(ioBufferBytes),
		grpc.WithWriteBufferSize(ioBufferBytes),
		// No service config is ever fetched and no call is retried: a
		// retry would keep a copy of every request (a write's content)
		// until the call commits.
		grpc.WithDisableServiceConfig(),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(evictedTrailer),
	)
	if err != nil {
		return nil, err
	}
	return &workerClient{WorkerServiceClient: fsmcpv1.NewWorkerServiceClient(cc), cc: cc}, nil
}

func (c *workerClient) close() { c.once.Do(func() { c.cc.Close() }) }

// hello asserts the protocol version; a mismatch is a bug, as both ends
// are one build.
func (c *workerClient) hello(ctx context.Context) (*fsmcpv1.Confinement, error) {
	resp, err := c.Hello(ctx, &fsmcpv1.HelloRequest{Version: fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	if resp.GetVersion() != fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1 {
		return nil, errors.New("BUG(fsmcp): worker speaks another protocol version")
	}
	return resp.GetConfinement(), nil
}

// fromRPC turns a worker call's error into a tool error.
// toolErrorOf is the worker's error e as the client sees it.
func toolErrorOf(e *fsmcpv1.Error) *toolError {
	return &toolError{code: e.GetCode(), message: e.GetMessage(), path: e.GetPath(), hasPath: len(e.GetPath()) > 0,
		currentSHA256: e.GetCurrentSha256(), count: e.GetCount(), nearest: e.GetNearest(),
		policyViolation: e.GetPolicyViolation(), missingDirectory: e.GetMissingDirectory()}
}

func fromRPC(err error) *toolError {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if e, ok := d.(*fsmcpv1.Error); ok {
			return toolErrorOf(e)
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		return errf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "the worker is unavailable")
	case codes.Canceled:
		return errf(fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED, "the call was cancelled")
	case codes.DeadlineExceeded:
		return errf(fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT, "the call timed out")
	case codes.ResourceExhausted:
		return errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "the request or reply is too large")
	}
	return errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "internal error")
}
