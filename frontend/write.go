package frontend

import (
	"context"
	"encoding/base64"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// if_sha256 is a *string without omitempty: the schema makes it required
// and lets it be null, so "absent" and "null" are two different requests.

type writeIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file relative to the root"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Content    string  `json:"content" jsonschema:"the file's new content"`
	Encoding   *string `json:"encoding,omitempty" jsonschema:"utf8 (default) or base64: how content is encoded"`
	IfSHA256   *string `json:"if_sha256" jsonschema:"required: the sha256 (64 lowercase hex) the file has now, or null if the file must not exist yet"`
}

type editIn struct {
	Old string `json:"old" jsonschema:"the bytes to find; must not be empty"`
	New string `json:"new" jsonschema:"the bytes to put in their place"`
	All *bool  `json:"all,omitempty" jsonschema:"replace every occurrence; without it, old must occur exactly once"`
}

type replaceIn struct {
	Path       *string  `json:"path,omitempty" jsonschema:"file relative to the root"`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Edits      []editIn `json:"edits" jsonschema:"edits applied in order to the file's bytes; all or none are applied"`
	Encoding   *string  `json:"encoding,omitempty" jsonschema:"utf8 (default) or base64: how old and new are encoded"`
	IfSHA256   *string  `json:"if_sha256" jsonschema:"required: the sha256 (64 lowercase hex) the file has now"`
}

type mkdirIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"directory relative to the root"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
}

type moveIn struct {
	From       *string `json:"from,omitempty" jsonschema:"the path to rename"`
	FromBase64 *string `json:"from_base64,omitempty" jsonschema:"from as base64, for names that are not UTF-8"`
	To         *string `json:"to,omitempty" jsonschema:"the new path; must not exist"`
	ToBase64   *string `json:"to_base64,omitempty" jsonschema:"to as base64, for names that are not UTF-8"`
}

type deleteIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file, symlink or directory relative to the root"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Recursive  *bool   `json:"recursive,omitempty" jsonschema:"also remove a directory's contents; symlinks are removed, never followed"`
}

func writeTools() []*tool {
	return []*tool{
		defineTool("fs_write", "Replace or create a regular file atomically. if_sha256 is required: the file's current sha256, "+
			"or null to create a file that must not exist yet. Mode, owner, extended attributes and ACLs are kept; "+
			"a new file gets mode 0644. Returns the new sha256 and size.",
			false, true, false, (*server).write),
		defineTool("fs_replace", "Find and replace bytes in a regular file atomically. Each edit's old must occur exactly once "+
			"(or set all); edits apply in order and all or none are applied. if_sha256 (the file's current sha256) is required.",
			false, true, false, (*server).replace),
		defineTool("fs_mkdir", "Create a directory and any missing parents. An existing directory is success.",
			false, false, true, (*server).mkdir),
		defineTool("fs_move", "Rename from to to. Never replaces an existing to; never copies across filesystems.",
			false, true, false, (*server).move),
		defineTool("fs_delete", "Remove a file, a symlink (not its target) or an empty directory; "+
			"a directory with entries needs recursive: true. The root cannot be deleted.",
			false, true, false, (*server).delete),
	}
}

// requiredPath is pathArg for a path that must be given.
func requiredPath(field string, text, b64 *string) ([]byte, error) {
	if text == nil && b64 == nil {
		return nil, invalidf("%s or %s_base64 is required", field, field)
	}
	return pathArg(field, text, b64)
}

// decode turns s into bytes per encoding (utf8 when nil).
func decode(field string, s string, encoding *string) ([]byte, error) {
	if encoding == nil || *encoding == "utf8" {
		return []byte(s), nil
	}
	if *encoding != "base64" {
		return nil, invalidf("encoding must be utf8 or base64")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, invalidf("%s: not valid base64", field)
	}
	return b, nil
}

// precondition checks if_sha256: a hex digest, or null for "must not exist".
func precondition(ifSHA *string) (string, bool, error) {
	if ifSHA == nil {
		return "", true, nil
	}
	if len(*ifSHA) != 64 || !isLowerHex(*ifSHA) {
		return "", false, invalidf("if_sha256 must be 64 lowercase hex digits or null")
	}
	return *ifSHA, false, nil
}

func (s *server) write(ctx context.Context, in *writeIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	content, err := decode("content", in.Content, in.Encoding)
	if err != nil {
		return nil, err
	}
	sum, mustNotExist, err := precondition(in.IfSHA256)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: content, IfSha256: sum, MustNotExist: mustNotExist})
	if err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("path", displayPath(p)).
		str("sha256", resp.GetSha256()).int("size", resp.GetSize()).
		bool("created", resp.GetCreated()).bool("broke_hard_link", resp.GetBrokeHardLink()), nil
}

func (s *server) replace(ctx context.Context, in *replaceIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	if len(in.Edits) == 0 {
		return nil, invalidf("edits must hold at least one edit")
	}
	edits := make([]*fsmcpv1.Edit, len(in.Edits))
	for i, e := range in.Edits {
		old, err := decode("old", e.Old, in.Encoding)
		if err != nil {
			return nil, err
		}
		if len(old) == 0 {
			return nil, invalidf("edits[%d].old is empty", i)
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
	resp, err := s.wc.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: p, Edits: edits, IfSha256: sum})
	if err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("path", displayPath(p)).
		int("replacements", resp.GetReplacements()).
		str("sha256", resp.GetSha256()).int("size", resp.GetSize()).
		bool("broke_hard_link", resp.GetBrokeHardLink()), nil
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
	if _, err := s.wc.Move(ctx, &fsmcpv1.MoveRequest{From: from, To: to}); err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("from", displayPath(from)).name("to", displayPath(to)), nil
}

func (s *server) delete(ctx context.Context, in *deleteIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, Recursive: in.Recursive != nil && *in.Recursive})
	if err != nil {
		return nil, err
	}
	return newObj().bool("ok", true).name("path", displayPath(p)).int("removed", resp.GetRemoved()), nil
}
