package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type moveIn struct {
	From       *string `json:"from,omitempty" jsonschema:"path to move; required unless from_base64"`
	FromBase64 *string `json:"from_base64,omitempty" jsonschema:"from as base64"`
	To         *string `json:"to,omitempty" jsonschema:"new path, which must not exist; required unless to_base64"`
	ToBase64   *string `json:"to_base64,omitempty" jsonschema:"to as base64"`
	IfSHA256   *string `json:"if_sha256,omitempty" jsonschema:"move only if from is a file with this sha256"`
	IfTree     *string `json:"if_tree_sha256,omitempty" jsonschema:"move only if from is a directory with this fs_digest tree_sha256"`
}

var moveTool = toolDecl[moveIn]{
	name:  "fs_move",
	title: "Move path",
	description: "Rename or move a file or directory within the root. It never replaces an existing " +
		"to: fs_delete that first if it must go. Optional if_sha256 (fs_stat) or if_tree_sha256 (fs_digest) guard it.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("from").acted(), onePath("to")},
	run:   (*server).move,
}

func (s *server) move(ctx context.Context, in *moveIn, _ *mcp.CallToolRequest) (*obj, error) {
	from, err := requiredPath("from", in.From, in.FromBase64)
	if err != nil {
		return nil, err
	}
	to, err := requiredPath("to", in.To, in.ToBase64)
	if err != nil {
		return nil, err
	}
	ifSHA, ifTree, err := guardArgs(in.IfSHA256, in.IfTree)
	if err != nil {
		return nil, err
	}
	if _, err := s.wc.Move(ctx, &fsmcpv1.MoveRequest{From: from, To: to, IfSha256: ifSHA, IfTreeSha256: ifTree}); err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("from", displayPath(from)).name("to", displayPath(to)), nil
}
