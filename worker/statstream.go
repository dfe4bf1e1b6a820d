package worker

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/grpc"
)

// hashProgressKey carries, in a call's context, the func(hashed, total
// int64) that hashFile reports to every progressEvery while it hashes.
type hashProgressKey struct{}

// StatStream implements fsmcpv1.WorkerServiceServer. It is Stat, with a
// progress message every progressEvery while a file is hashed (after the
// first progressEvery), then one message marked done with the reply. The
// call's deadline stops the hash within one buffer.
func (s *Service) StatStream(req *fsmcpv1.StatStreamRequest, stream grpc.ServerStreamingServer[fsmcpv1.StatStreamResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	var sendErr error
	ctx = context.WithValue(ctx, hashProgressKey{}, func(hashed, total int64) {
		if sendErr != nil {
			return
		}
		if sendErr = stream.Send(&fsmcpv1.StatStreamResponse{Progress: &fsmcpv1.Progress{BytesHashed: hashed, BytesTotal: total}}); sendErr != nil {
			cancel()
		}
	})
	resp, err := s.stat(ctx, req.GetStat())
	if err != nil {
		if sendErr != nil {
			return fsError("hash", "", sendErr)
		}
		return err
	}
	return stream.Send(&fsmcpv1.StatStreamResponse{Stat: resp, Done: true})
}
