package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type deleteIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Recursive  *bool   `json:"recursive,omitempty" jsonschema:"also remove a directory's contents"`
	IfSHA256   *string `json:"if_sha256,omitempty" jsonschema:"delete only if the path is a file with this sha256"`
	IfTree     *string `json:"if_tree_sha256,omitempty" jsonschema:"delete only if the path is a directory with this fs_digest tree_sha256"`
}

var deleteTool = toolDecl[deleteIn]{
	name:  "fs_delete",
	title: "Delete path",
	description: "Remove a file, a symlink (never its target) or an empty directory. A directory " +
		"with entries needs recursive: true; fs_list shows what it holds. The root cannot be removed. " +
		"Optional if_sha256 (fs_stat) or if_tree_sha256 (fs_digest) guard it.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path").acted()},
	run:   (*server).delete,
}

func (s *server) delete(ctx context.Context, in *deleteIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	ifSHA, ifTree, err := guardArgs(in.IfSHA256, in.IfTree)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, Recursive: in.Recursive != nil && *in.Recursive,
		IfSha256: ifSHA, IfTreeSha256: ifTree})
	if err != nil {
		return nil, err
	}
	return withUndo(ctx, newObj().bool("ok", true).name("path", displayPath(p)).int("removed", resp.GetRemoved()), resp.GetUndo()), nil
}
