package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type mkdirIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"directory; required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
}

var mkdirTool = toolDecl[mkdirIn]{
	name:  "fs_mkdir",
	title: "Make directory",
	description: "Create a directory and any missing parents; an existing directory is success. " +
		"fs_write needs the directory of a new file to exist.",
	hints: hints{idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).mkdir,
}

func (s *server) mkdir(ctx context.Context, in *mkdirIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: p})
	if err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("path", displayPath(p)).bool("created", resp.GetCreated()), nil
}
