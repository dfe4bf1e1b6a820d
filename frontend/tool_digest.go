package frontend

import (
	"context"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type digestIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file or directory; root if left out, \"\" or \".\""`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
}

var digestTool = toolDecl[digestIn]{
	name:  "fs_digest",
	title: "Digest tree",
	description: "Hash a directory's whole subtree, or one file, into tree_sha256. " +
		"It covers names as bytes, types, modes, file contents and symlink targets that stay inside; ignore files do not " +
		"apply. Pass it to fs_delete or fs_move as if_tree_sha256 to act only on the tree you saw. Large trees report progress.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).digest,
}

func (s *server) digest(ctx context.Context, in *digestIn, req *mcp.CallToolRequest) (*obj, error) {
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	stream, err := s.wc.Digest(ctx, &fsmcpv1.DigestRequest{Path: p})
	if err != nil {
		return nil, err
	}
	notify := progressFunc(ctx, req)
	resp, err := finalMessage(stream, func(pr *fsmcpv1.Progress) {
		notify(float64(pr.GetFilesSearched()), fmt.Sprintf("%d files hashed", pr.GetFilesSearched()))
	})
	if err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("path", displayPath(p)).str("type", typeName(resp.GetType())).
		str("tree_sha256", resp.GetTreeSha256()).int("files", resp.GetFiles()).
		int("directories", resp.GetDirectories()).int("bytes", resp.GetBytes()), nil
}
