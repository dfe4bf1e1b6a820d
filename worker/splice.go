package worker

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// Splice implements fsmcpv1.WorkerServiceServer. It replaces delete bytes
// at offset with insert and commits the result like Write: the bytes
// before and after are copied file to file (see body.fill), never through
// the request.
func (s *Service) Splice(ctx context.Context, req *fsmcpv1.SpliceRequest) (*fsmcpv1.SpliceResponse, error) {
	p, err := editPath(req.GetPath(), req.GetIfSha256(), req.GetMustNotExist())
	if err != nil {
		return nil, err
	}
	if req.GetOffset() < 0 || req.GetDelete() < 0 {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "splice: offset and delete must not be negative")
	}
	t, err := s.openEdit(ctx, "splice", p, false, req.GetIfSha256())
	if err != nil {
		return nil, err
	}
	defer t.close()
	cur := t.cur
	var size int64
	if cur.exists {
		size = cur.st.Size
	}
	switch {
	case req.GetOffset() > size:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "splice: offset %d is past the end of the file (%d bytes)", req.GetOffset(), size)
	case req.GetDelete() > size-req.GetOffset():
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "splice: delete %d runs past the end of the file (%d bytes from offset %d)", req.GetDelete(), size-req.GetOffset(), req.GetOffset())
	}
	b := &body{data: req.GetInsert()}
	if cur.exists {
		b = &body{spliced: true, off: req.GetOffset(), delete: req.GetDelete(), insert: req.GetInsert()}
	}
	res, err := s.commitOrPreview(ctx, t.d, t.base, p, cur, b, req.GetDryRun())
	if err != nil {
		return nil, err
	}
	return &fsmcpv1.SpliceResponse{Sha256: res.sha256, Size: res.size, Created: !cur.exists,
		BrokeHardLink: res.brokeHardLink, Diff: res.diff, Undo: res.undo}, nil
}
