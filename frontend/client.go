package frontend

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/fsmcp/fsmcp/proto/callstream"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"google.golang.org/grpc"
)

// workerClient is the front-end's gRPC connection to the worker. Its
// Stat, List, Read and Write send small calls on the worker's Calls
// stream and larger ones as their own RPCs (callstream.Client); every
// other method is its RPC.
type workerClient struct {
	*callstream.Client
	cc   *grpc.ClientConn
	once sync.Once
}

// dialWorker speaks gRPC over the already-connected socket, with the
// sizing and bounds the worker serves with (link.Dial). It never
// redials: once the socket is gone, every call fails with Unavailable.
func dialWorker(conn net.Conn) (*workerClient, error) {
	// A call's eviction note is read from its trailer, on its own RPC
	// or on the Calls stream (tool_checkpoint.go).
	cc, err := link.Dial(conn, grpc.WithChainUnaryInterceptor(evictedTrailer))
	if err != nil {
		return nil, err
	}
	return &workerClient{Client: callstream.New(fsmcpv1.NewWorkerServiceClient(cc), callstream.WithTrailer(noteEvicted)), cc: cc}, nil
}

func (c *workerClient) close() {
	c.once.Do(func() {
		c.Client.Close()
		c.cc.Close()
	})
}

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

// toolErrorOf is the worker's error e as the client sees it.
func toolErrorOf(e *link.Error) *toolError {
	return &toolError{code: e.Code, message: e.Message, path: []byte(e.Path), hasPath: e.Path != "",
		currentSHA256: e.CurrentSHA256, count: e.Count, nearest: e.Nearest,
		policyViolation: e.PolicyViolation, missingDirectory: []byte(e.MissingDirectory), offset: e.Offset}
}

// fromRPC turns a worker call's error into a tool error.
func fromRPC(err error) *toolError {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	return toolErrorOf(link.Decode(err))
}
