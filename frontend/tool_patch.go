package frontend

import (
	"context"
	"encoding/base64"
	"maps"
	"slices"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type patchIn struct {
	Patch          string             `json:"patch" jsonschema:"a unified diff as diff -u or git diff write it, or a *** Begin Patch envelope; one or more files"`
	Encoding       *string            `json:"encoding,omitempty" jsonschema:"how patch is encoded; default utf8 (base64 for bytes that are not UTF-8)"`
	IfSHA256       map[string]*string `json:"if_sha256,omitempty" jsonschema:"every path the patch touches, as the patch names it, to its sha256 now, or to null for a file the patch creates; a dry run needs none and answers them"`
	IfSHA256Base64 map[string]*string `json:"if_sha256_base64,omitempty" jsonschema:"as if_sha256, keyed by each path as base64, for names that are not UTF-8"`
	DryRun         *bool              `json:"dry_run,omitempty" jsonschema:"change nothing; answer each file's sha256, size and diff, and the if_sha256 the real call needs"`
}

var patchTool = toolDecl[patchIn]{
	name:  "fs_patch",
	title: "Apply patch",
	description: "Apply a unified diff or a *** Begin Patch envelope to one or more files: all change or none do, even across a crash. " +
		"In an envelope, an @@ anchor line moves the search past its first match; the lines after it must then match once. " +
		"Each hunk's lines must match the file exactly (no fuzz) at exactly one place, else no_match (with the nearest " +
		"candidate) or ambiguous_match. if_sha256 maps every touched path to its sha256 from fs_stat or fs_read, or to null " +
		"for a file it creates. /dev/null creates or deletes a file; missing parent directories are created and directories " +
		"the patch leaves empty are removed. dry_run: true answers the diffs and writes nothing; it needs no if_sha256 and answers " +
		"the if_sha256 (and if_sha256_base64) to pass to the real call. " +
		"A reply's undo token, when the server keeps what changes replace, reverses the whole patch with fs_undo.",
	hints: hints{destructive: true},
	paths: []pathDecl{keyedPaths("if_sha256")},
	run:   (*server).patch,
}

func (s *server) patch(ctx context.Context, in *patchIn, _ *mcp.CallToolRequest) (*obj, error) {
	patch, err := decode("patch", in.Patch, in.Encoding)
	if err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return nil, invalidf("patch is empty")
	}
	dry := boolArg(in.DryRun)
	pre, err := patchPreconditions(in.IfSHA256, in.IfSHA256Base64, dry)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Patch(ctx, &fsmcpv1.PatchRequest{Patch: patch, Preconditions: pre, DryRun: dry})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).str("format", resp.GetFormat())
	if dry {
		doc.bool("dry_run", true)
	}
	doc.key("files")
	doc.b = append(doc.b, '[')
	truncated := false
	for i, f := range resp.GetFiles() {
		e := newObj().name("path", f.GetPath()).bool("created", f.GetCreated()).bool("deleted", f.GetDeleted()).
			int("hunks", f.GetHunks())
		if !f.GetDeleted() {
			e.str("sha256", f.GetSha256()).int("size", f.GetSize())
		}
		if len(f.GetMovedTo()) > 0 {
			e.name("moved_to", f.GetMovedTo())
		}
		if !dry {
			e.bool("broke_hard_link", f.GetBrokeHardLink())
		} else {
			// Each diff gets an equal share of what the reply has left.
			left := len(resp.GetFiles()) - i
			budget := (int(s.cfg.MaxResponseBytes) - doc.size() - e.size() - 64*left) / left
			if appendDiff(e, f.GetDiff(), budget) {
				truncated = true
			}
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, e.bytes()...)
	}
	doc.b = append(doc.b, ']')
	if dry {
		doc.bool("diff_truncated", truncated)
		ifSHA(doc, resp.GetFiles())
	}
	return withUndo(ctx, doc, resp.GetUndo()), nil
}

// patchPreconditions turns if_sha256 and its twin if_sha256_base64 (the
// same object keyed by each path as base64, for names that are not UTF-8)
// into the worker's preconditions. At least one must be given, except for
// a dry run; the worker refuses a path named twice (in both, say), one the
// patch does not touch and (but in a dry run) a touched one missing.
func patchPreconditions(text, b64 map[string]*string, dry bool) ([]*fsmcpv1.PatchPrecondition, error) {
	if text == nil && b64 == nil && !dry {
		return nil, invalidf("if_sha256 is required: an object from each path the patch touches to its sha256, or null for a file it creates " +
			"(if_sha256_base64 for names that are not UTF-8)")
	}
	pre := make([]*fsmcpv1.PatchPrecondition, 0, len(text)+len(b64))
	add := func(field, key string, p []byte, h *string) error {
		sum, mustNotExist, err := precondition(h)
		if err != nil {
			return invalidf("%s[%q] must be 64 lowercase hex digits (a sha256 from fs_stat) or null", field, key)
		}
		pre = append(pre, &fsmcpv1.PatchPrecondition{Path: p, Sha256: sum, MustNotExist: mustNotExist})
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(text)) {
		if err := add("if_sha256", k, []byte(k), text[k]); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b64)) {
		p, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			return nil, invalidf("if_sha256_base64[%q]: each key must be a path in standard base64 (RFC 4648, with padding)", k)
		}
		if err := add("if_sha256_base64", k, p, b64[k]); err != nil {
			return nil, err
		}
	}
	return pre, nil
}
