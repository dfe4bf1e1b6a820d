package frontend

import (
	"context"
	"io"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressFunc returns a function that sends MCP progress notifications
// for the call, or one that does nothing when the client sent no token.
func progressFunc(ctx context.Context, req *mcp.CallToolRequest) func(progress float64, message string) {
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	if token == nil || req.Session == nil {
		return func(float64, string) {}
	}
	return func(progress float64, message string) {
		// A failed notification must not fail the search.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: progress, Message: message,
		})
	}
}

// searchMessage is what Glob and Grep stream: progress, then one message
// marked done that carries the page.
type searchMessage interface {
	GetDone() bool
	GetProgress() *fsmcpv1.Progress
}

// finalMessage reads a search stream up to its page, passing each progress
// message to progress.
func finalMessage[M searchMessage](stream interface{ Recv() (M, error) }, progress func(*fsmcpv1.Progress)) (M, error) {
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			var zero M
			return zero, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "the worker ended the search without a reply")
		}
		if err != nil || m.GetDone() {
			return m, err
		}
		if pr := m.GetProgress(); pr != nil {
			progress(pr)
		}
	}
}
