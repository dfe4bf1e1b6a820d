package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
)

// View implements fsmcpv1.WorkerServiceServer: the whole of a regular file
// no larger than the media bound (--max-media-bytes, from the trusted
// command line), with its sha256. A larger file is too_large before a
// byte of it is read. The file's bytes are reserved from the memory
// budget, twice (as read, and as encoded in the reply), until the reply
// is encoded: calls beyond the budget wait, then answer unavailable. What
// the bytes are is the front-end's to judge.
func (s *Service) View(ctx context.Context, req *fsmcpv1.ViewRequest) (*fsmcpv1.ViewResponse, error) {
	const op = "view"
	f, st, _, err := s.openContent(ctx, op, req.GetPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, _ := clientPath(req.GetPath())
	if st.Size > s.maxMedia {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p,
			"%s: %d bytes, more than the %d of --max-media-bytes", op, st.Size, s.maxMedia)
	}
	// The worker holds the file twice, as read and as gRPC encodes the
	// reply, until the reply is encoded and queued.
	release, err := s.reserveReply(ctx, op, p, 2*(st.Size+1))
	if err != nil {
		return nil, err
	}
	defer release()
	// One byte more than the size: a file that grew since the fstat is
	// seen to have grown.
	data := make([]byte, st.Size+1)
	n, err := io.ReadFull(io.NewSectionReader(f, 0, st.Size+1), data)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fsError(op, p, err)
	}
	after, err := fstat(f)
	if err != nil {
		return nil, fsError(op, p, err)
	}
	if int64(n) != st.Size || hashcache.KeyOf(after) != hashcache.KeyOf(st) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "%s: the file changed while it was read", op)
	}
	sum := sha256.Sum256(data[:n])
	return &fsmcpv1.ViewResponse{Data: data[:n], Sha256: hex.EncodeToString(sum[:])}, nil
}
