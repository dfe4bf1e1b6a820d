package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type checkpointIn struct {
	Label *string `json:"label,omitempty" jsonschema:"a few words to recognise the checkpoint by"`
}

func checkpointTool() *tool {
	t := defineTool("fs_checkpoint", "Record the whole tree's state (names, types, modes, content hashes) as a checkpoint "+
		"that fs_rewind can bring the tree back to. Nothing is copied: from now on every change made through these tools "+
		"keeps the version it replaced or removed. Checkpoints survive a restart; the oldest go first under the quarantine's bound.",
		false, false, false, (*server).checkpoint).titled("Take a checkpoint").paths()
	t.enabled = func(c *Config) bool { return c.Quarantine != "" }
	return t
}

func (s *server) checkpoint(ctx context.Context, in *checkpointIn, _ *mcp.CallToolRequest) (*obj, error) {
	req := &fsmcpv1.CheckpointRequest{}
	if in.Label != nil {
		req.Label = *in.Label
	}
	resp, err := s.wc.Checkpoint(ctx, req)
	if err != nil {
		return nil, err
	}
	cp := resp.GetCheckpoint()
	doc := newObj().bool("ok", true).str("id", cp.GetId()).str("label", cp.GetLabel()).str("created", formatTime(cp.GetCreated())).
		str("tree_sha256", resp.GetTreeSha256()).int("files", cp.GetFiles())
	if ev := resp.GetEvictedCheckpoint(); ev != "" {
		doc.str("evicted_checkpoint", ev)
	}
	return doc, nil
}
