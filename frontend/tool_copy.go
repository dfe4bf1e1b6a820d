package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type copyIn struct {
	From       *string `json:"from,omitempty" jsonschema:"file or directory to copy; required unless from_base64"`
	FromBase64 *string `json:"from_base64,omitempty" jsonschema:"from as base64"`
	To         *string `json:"to,omitempty" jsonschema:"new path, which must not exist; required unless to_base64"`
	ToBase64   *string `json:"to_base64,omitempty" jsonschema:"to as base64"`
	Recursive  *bool   `json:"recursive,omitempty" jsonschema:"copy a directory and everything in it"`
}

var copyTool = toolDecl[copyIn]{
	name:  "fs_copy",
	title: "Copy path",
	description: "Copy a file, or with recursive: true a directory tree, to a new path. " +
		"to must not exist (fs_delete it first); it is never replaced. Content, mode, owner, extended attributes and ACLs " +
		"are copied, or the copy is refused. A directory appears whole or not at all; a tree holding a symlink, fifo, " +
		"socket or device is refused and nothing is copied.",
	hints: hints{},
	paths: []pathDecl{onePath("from").acted(), onePath("to")},
	run:   (*server).copy,
}

func (s *server) copy(ctx context.Context, in *copyIn, _ *mcp.CallToolRequest) (*obj, error) {
	from, err := requiredPath("from", in.From, in.FromBase64)
	if err != nil {
		return nil, err
	}
	to, err := requiredPath("to", in.To, in.ToBase64)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Copy(ctx, &fsmcpv1.CopyRequest{From: from, To: to, Recursive: boolArg(in.Recursive)})
	if err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("from", displayPath(from)).name("to", displayPath(to)).
		int("files", resp.GetFiles()).int("directories", resp.GetDirectories()).int("bytes", resp.GetBytes()), nil
}
