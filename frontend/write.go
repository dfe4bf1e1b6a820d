package frontend

import (
	"context"
	"encoding/base64"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// if_sha256 is a *string without omitempty: the schema makes it required
// and lets it be null, so "absent" and "null" are two different requests.

// fileEditIn is what fs_write and fs_splice both take: the file, its
// precondition and dry_run. Each embeds it; the schema lists its fields
// first.
type fileEditIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file; required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	IfSHA256   *string `json:"if_sha256" jsonschema:"the file's sha256 now, or null to create it"`
	DryRun     *bool   `json:"dry_run,omitempty" jsonschema:"change nothing; answer the sha256, size and diff it would give"`
}

// args checks the path and the precondition.
func (in *fileEditIn) args() (p []byte, sum string, mustNotExist, dry bool, err error) {
	if p, err = requiredPath("path", in.Path, in.PathBase64); err != nil {
		return nil, "", false, false, err
	}
	if sum, mustNotExist, err = precondition(in.IfSHA256); err != nil {
		return nil, "", false, false, err
	}
	return p, sum, mustNotExist, boolArg(in.DryRun), nil
}

// fileEditReply is what fs_write and fs_splice both answer.
type fileEditReply interface {
	GetSha256() string
	GetSize() int64
	GetCreated() bool
	GetBrokeHardLink() bool
	GetDiff() []byte
	GetUndo() string
}

func (s *server) fileEditDoc(ctx context.Context, p []byte, resp fileEditReply, dry bool) *obj {
	doc := newObj().bool("ok", true).name("path", displayPath(p)).
		str("sha256", resp.GetSha256()).int("size", resp.GetSize()).
		bool("created", resp.GetCreated()).bool("broke_hard_link", resp.GetBrokeHardLink())
	return withUndo(ctx, s.previewFields(doc, resp.GetDiff(), dry), resp.GetUndo())
}

type writeIn struct {
	fileEditIn
	Content  string  `json:"content" jsonschema:"the whole new content"`
	Encoding *string `json:"encoding,omitempty" jsonschema:"how content is encoded; default utf8"`
	Append   *bool   `json:"append,omitempty" jsonschema:"add content at the end; if_sha256 is the hash before, so a retry fails"`
}

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
	IfSHA256   *string  `json:"if_sha256" jsonschema:"the file's sha256 now"`
	DryRun     *bool    `json:"dry_run,omitempty" jsonschema:"change nothing; answer the sha256, size and diff it would give"`
}

type mkdirIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"directory; required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
}

type moveIn struct {
	From       *string `json:"from,omitempty" jsonschema:"path to move; required unless from_base64"`
	FromBase64 *string `json:"from_base64,omitempty" jsonschema:"from as base64"`
	To         *string `json:"to,omitempty" jsonschema:"new path, which must not exist; required unless to_base64"`
	ToBase64   *string `json:"to_base64,omitempty" jsonschema:"to as base64"`
	IfSHA256   *string `json:"if_sha256,omitempty" jsonschema:"move only if from is a file with this sha256"`
	IfTree     *string `json:"if_tree_sha256,omitempty" jsonschema:"move only if from is a directory with this fs_digest tree_sha256"`
}

type deleteIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Recursive  *bool   `json:"recursive,omitempty" jsonschema:"also remove a directory's contents"`
	IfSHA256   *string `json:"if_sha256,omitempty" jsonschema:"delete only if the path is a file with this sha256"`
	IfTree     *string `json:"if_tree_sha256,omitempty" jsonschema:"delete only if the path is a directory with this fs_digest tree_sha256"`
}

// requiredPath is pathArg for a path that must be given.
func requiredPath(field string, text, b64 *string) ([]byte, error) {
	if text == nil && b64 == nil {
		return nil, invalidf("%s is required: a path relative to the root, such as \"src/main.go\", or \".\" for the root itself; "+
			"%s_base64 for a name that is not UTF-8", field, field)
	}
	return pathArg(field, text, b64)
}

// rootedPath is pathArg for a tool that works on a directory: left out, it
// is the root, for clients that cannot send an empty string.
func rootedPath(field string, text, b64 *string) ([]byte, error) {
	if text == nil && b64 == nil {
		return []byte{}, nil
	}
	return pathArg(field, text, b64)
}

// decode turns s into bytes per encoding (utf8 when nil).
func decode(field string, s string, encoding *string) ([]byte, error) {
	if encoding == nil || *encoding == "utf8" {
		return []byte(s), nil
	}
	if *encoding != "base64" {
		return nil, bug(fmt.Errorf("encoding %q passed the schema", *encoding))
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, invalidf("%s must be standard base64 (RFC 4648, with padding) when encoding is base64", field)
	}
	return b, nil
}

// precondition checks if_sha256: a hex digest, or null for "must not exist".
func precondition(ifSHA *string) (string, bool, error) {
	if ifSHA == nil {
		return "", true, nil
	}
	if len(*ifSHA) != 64 || !isLowerHex(*ifSHA) {
		return "", false, invalidf("if_sha256 must be 64 lowercase hex digits (a sha256 from fs_stat) or null to create the file")
	}
	return *ifSHA, false, nil
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
	resp, err := s.wc.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: content, IfSha256: sum, MustNotExist: mustNotExist,
		Append: boolArg(in.Append), DryRun: dry})
	if err != nil {
		return nil, err
	}
	return s.fileEditDoc(ctx, p, resp, dry), nil
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
	resp, err := s.wc.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: p, Edits: edits, IfSha256: sum, DryRun: dry})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).name("path", displayPath(p)).
		int("replacements", resp.GetReplacements()).
		str("sha256", resp.GetSha256()).int("size", resp.GetSize()).
		bool("broke_hard_link", resp.GetBrokeHardLink())
	return withUndo(ctx, s.previewFields(doc, resp.GetDiff(), dry), resp.GetUndo()), nil
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
