package worker

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// rootGone reports whether the root directory was removed on the host
// (its link count is 0). The worker holds the directory open, so every
// call would otherwise answer something different: a stat of the root
// ok with nlink 0, a search internal, a write not_found. A root renamed
// or moved elsewhere still exists, and is still served.
func (s *Service) rootGone() bool {
	var st unix.Stat_t
	return unix.Fstat(s.rootPath.fd, &st) == nil && st.Nlink == 0
}

// errRootGone is every call's answer once the root is gone: unavailable,
// since only the operator can bring it back (recreating the directory
// does not: the worker holds the old one).
func (s *Service) errRootGone() error {
	return newError(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "",
		"the served directory was deleted; restart fsmcp on an existing directory")
}

// rootUnary answers every unary call, Hello included (it backs the
// front-end's /health), with errRootGone once the root is gone.
func (s *Service) rootUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if s.rootGone() {
		return nil, s.errRootGone()
	}
	return h(ctx, req)
}

// rootStream is rootUnary for streaming calls. The Calls stream is
// transport: each call on it runs through rootUnary itself.
func (s *Service) rootStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if info.FullMethod != fsmcpv1.WorkerService_Calls_FullMethodName && s.rootGone() {
		return s.errRootGone()
	}
	return h(srv, ss)
}
