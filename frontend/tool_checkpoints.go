package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type checkpointsIn struct{}

var checkpointsTool = toolDecl[checkpointsIn]{
	name:  "fs_checkpoints",
	title: "List checkpoints",
	description: "List the checkpoints fs_rewind can go back to, newest first: id, label, " +
		"when it was taken, and how many files and bytes it recorded.",
	hints:   hints{readOnly: true, idempotent: true},
	enabled: func(c *Config) bool { return c.Quarantine != "" },
	run:     (*server).checkpoints,
}

func (s *server) checkpoints(ctx context.Context, _ *checkpointsIn, _ *mcp.CallToolRequest) (*obj, error) {
	resp, err := s.wc.Checkpoints(ctx, &fsmcpv1.CheckpointsRequest{})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true)
	doc.key("checkpoints")
	doc.b = append(doc.b, '[')
	for i, cp := range resp.GetCheckpoints() {
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		e := newObj().str("id", cp.GetId()).str("label", cp.GetLabel()).str("created", formatTime(cp.GetCreated())).
			int("files", cp.GetFiles()).int("bytes", cp.GetBytes())
		doc.b = append(doc.b, e.bytes()...)
	}
	doc.b = append(doc.b, ']')
	return doc, nil
}
