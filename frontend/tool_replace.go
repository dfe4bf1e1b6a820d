package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type editIn struct {
	Old string `json:"old" jsonschema:"exact text to find, not empty"`
	New string `json:"new" jsonschema:"text to put in its place"`
	All *bool  `json:"all,omitempty" jsonschema:"replace every occurrence"`
}

type replaceIn struct {
	Path       *string  `json:"path,omitempty" jsonschema:"file; required unless path_base64"`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Edits      []editIn `json:"edits" jsonschema:"applied in order; all or none"`
	Encoding   *string  `json:"encoding,omitempty" jsonschema:"how old and new are encoded; default utf8"`
	Charset    *string  `json:"charset,omitempty" jsonschema:"the file's charset: old and new are encoded into it, and the file must round-trip; default utf-8"`
	EOL        *string  `json:"eol,omitempty" jsonschema:"file: a \n in old and new stands for \r\n when the file uses \r\n throughout"`
	IfSHA256   *string  `json:"if_sha256" jsonschema:"the file's sha256 now"`
	DryRun     *bool    `json:"dry_run,omitempty" jsonschema:"change nothing; answer the sha256, size and diff it would give"`
}

var replaceTool = toolDecl[replaceIn]{
	name:  "fs_replace",
	title: "Edit file",
	description: "Replace exact text in a file atomically. Each edit's old must occur exactly once " +
		"(or set all); edits apply in order, all or none. if_sha256: the sha256 from fs_stat or the last " +
		"write; the reply's sha256 is the next one. Read it first with fs_read. no_match names the nearest " +
		"candidate; dry_run: true shows the diff. Mode as fs_write.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).replace,
}

func (s *server) replace(ctx context.Context, in *replaceIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	edits := make([]*fsmcpv1.Edit, len(in.Edits))
	for i, e := range in.Edits {
		old, err := decode("old", e.Old, in.Encoding)
		if err != nil {
			return nil, err
		}
		if len(old) == 0 {
			return nil, invalidf("edits[%d].old must not be empty", i)
		}
		nw, err := decode("new", e.New, in.Encoding)
		if err != nil {
			return nil, err
		}
		edits[i] = &fsmcpv1.Edit{Old: old, New: nw, All: e.All != nil && *e.All}
	}
	sum, _, err := precondition(in.IfSHA256)
	if err != nil {
		return nil, err
	}
	dry := in.DryRun != nil && *in.DryRun
	cs, err := charsetArg(in.Charset, in.Encoding)
	if err != nil {
		return nil, err
	}
	var eol string
	if in.EOL != nil {
		eol = *in.EOL
	}
	resp, err := s.wc.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: p, Edits: edits, IfSha256: sum, DryRun: dry, Charset: cs, Eol: eol})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).name("path", displayPath(p)).
		int("replacements", resp.GetReplacements()).
		str("sha256", resp.GetSha256()).int("size", resp.GetSize()).
		bool("broke_hard_link", resp.GetBrokeHardLink())
	return withUndo(ctx, s.previewFields(doc, resp.GetDiff(), dry), resp.GetUndo()), nil
}
