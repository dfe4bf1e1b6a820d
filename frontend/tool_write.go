package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type writeIn struct {
	fileEditIn
	Content  string  `json:"content" jsonschema:"the whole new content"`
	Encoding *string `json:"encoding,omitempty" jsonschema:"how content is encoded; default utf8"`
	Append   *bool   `json:"append,omitempty" jsonschema:"add content at the end; if_sha256 is the hash before, so a retry fails"`
	Charset  *string `json:"charset,omitempty" jsonschema:"the file's charset: content is encoded into it; default utf-8"`
}

var writeTool = toolDecl[writeIn]{
	name:  "fs_write",
	title: "Write file",
	description: "Create or replace a whole file atomically. if_sha256: the sha256 from fs_stat (fails if " +
		"it changed since), or null to create; the reply's sha256 is the next one. " +
		"The directory must exist (fs_mkdir); for small edits use fs_replace. append: true adds at the end; " +
		"dry_run: true shows the diff. Drops setuid/setgid/capabilities.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).write,
}

func (s *server) write(ctx context.Context, in *writeIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, sum, mustNotExist, dry, err := in.args()
	if err != nil {
		return nil, err
	}
	content, err := decode("content", in.Content, in.Encoding)
	if err != nil {
		return nil, err
	}
	cs, err := charsetArg(in.Charset, in.Encoding)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: content, IfSha256: sum, MustNotExist: mustNotExist,
		Append: boolArg(in.Append), DryRun: dry, Charset: cs})
	if err != nil {
		return nil, err
	}
	return s.fileEditDoc(ctx, p, resp, dry), nil
}
