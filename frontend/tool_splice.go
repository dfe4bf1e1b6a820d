package frontend

import (
	"context"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type spliceIn struct {
	fileEditIn
	Offset   int64   `json:"offset" jsonschema:"byte offset where the change starts, at most the file's size"`
	Delete   *int64  `json:"delete,omitempty" jsonschema:"bytes to remove at offset; default 0"`
	Insert   *string `json:"insert,omitempty" jsonschema:"bytes to put at offset; default none"`
	Encoding *string `json:"encoding,omitempty" jsonschema:"how insert is encoded; default utf8"`
}

var spliceTool = toolDecl[spliceIn]{
	name:  "fs_splice",
	title: "Splice file",
	description: "Replace delete bytes at a byte offset with insert, atomically like fs_write. " +
		"It inserts, cuts or overwrites without resending the file. if_sha256 is the sha256 from fs_stat or fs_read (or null " +
		"to create the file at offset 0); the reply's sha256 is the next one. Offsets come from fs_read or fs_grep; an " +
		"offset past the end is refused. dry_run: true answers the diff and writes nothing.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).splice,
}

func (s *server) splice(ctx context.Context, in *spliceIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, sum, mustNotExist, dry, err := in.args()
	if err != nil {
		return nil, err
	}
	var insert []byte
	if in.Insert != nil {
		if insert, err = decode("insert", *in.Insert, in.Encoding); err != nil {
			return nil, err
		}
	}
	var del int64
	if in.Delete != nil {
		del = *in.Delete
	}
	if in.Offset < 0 || del < 0 {
		return nil, bug(fmt.Errorf("offset %d, delete %d passed the schema", in.Offset, del))
	}
	resp, err := s.wc.Splice(ctx, &fsmcpv1.SpliceRequest{Path: p, Offset: in.Offset, Delete: del, Insert: insert,
		IfSha256: sum, MustNotExist: mustNotExist, DryRun: dry})
	if err != nil {
		return nil, err
	}
	return s.fileEditDoc(ctx, p, resp, dry), nil
}
