package frontend

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The editing tools of the contract's "Editing like an agent edits": one
// section per tool, each its input type, its definition and its handler.

// previewFields adds a dry run's answer to doc: dry_run, and the diff
// (see appendDiff) within what --max-response-bytes leaves.
func (s *server) previewFields(doc *obj, diff []byte, dryRun bool) *obj {
	if !dryRun {
		return doc
	}
	doc.bool("dry_run", true)
	appendDiff(doc, diff, int(s.cfg.MaxResponseBytes)-doc.size())
	return doc
}

// appendDiff adds diff to o as text when it is valid UTF-8 (else as
// diff_base64), cut at a whole line so that the fields take at most budget
// bytes, with diff_truncated saying whether it was cut. It reports that.
func appendDiff(o *obj, diff []byte, budget int) bool {
	budget -= len(`,"diff_base64":"","diff_truncated":false`)
	text := utf8.Valid(diff)
	keep := fitLines(diff, max(budget, 0), text)
	if text {
		o.key("diff")
		o.b = jsontext.AppendString(o.b, diff[:keep])
	} else {
		o.key("diff_base64")
		o.b = append(o.b, '"')
		o.b = base64.StdEncoding.AppendEncode(o.b, diff[:keep])
		o.b = append(o.b, '"')
	}
	o.bool("diff_truncated", keep < len(diff))
	return keep < len(diff)
}

// fitLines returns the length of the longest prefix of diff made of whole
// lines whose encoding (JSON-escaped text, or base64) fits in budget bytes.
func fitLines(diff []byte, budget int, text bool) int {
	size := func(n int) int { return base64.StdEncoding.EncodedLen(n) }
	if text {
		size = nil
	}
	keep, used := 0, 0
	for keep < len(diff) {
		end := len(diff)
		if i := bytes.IndexByte(diff[keep:], '\n'); i >= 0 {
			end = keep + i + 1
		}
		if size != nil {
			if size(end) > budget {
				break
			}
		} else {
			n := 0
			for _, c := range diff[keep:end] {
				n += escapedLen(c)
			}
			if used+n > budget {
				break
			}
			used += n
		}
		keep = end
	}
	return keep
}

// fs_splice

type spliceIn struct {
	fileEditIn
	Offset   int64   `json:"offset" jsonschema:"byte offset where the change starts, at most the file's size"`
	Delete   *int64  `json:"delete,omitempty" jsonschema:"bytes to remove at offset; default 0"`
	Insert   *string `json:"insert,omitempty" jsonschema:"bytes to put at offset; default none"`
	Encoding *string `json:"encoding,omitempty" jsonschema:"how insert is encoded; default utf8"`
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

// guardArgs checks the optional preconditions of fs_delete and fs_move.
func guardArgs(ifSHA, ifTree *string) (string, string, error) {
	var a, b string
	if ifSHA != nil {
		if len(*ifSHA) != 64 || !isLowerHex(*ifSHA) {
			return "", "", invalidf("if_sha256 must be 64 lowercase hex digits")
		}
		a = *ifSHA
	}
	if ifTree != nil {
		if len(*ifTree) != 64 || !isLowerHex(*ifTree) {
			return "", "", invalidf("if_tree_sha256 must be 64 lowercase hex digits")
		}
		b = *ifTree
	}
	if a != "" && b != "" {
		return "", "", invalidf("give if_sha256 (a file) or if_tree_sha256 (a directory), not both")
	}
	return a, b, nil
}

// fs_digest

type digestIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file or directory; root if left out, \"\" or \".\""`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
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

// fs_copy

type copyIn struct {
	From       *string `json:"from,omitempty" jsonschema:"file or directory to copy; required unless from_base64"`
	FromBase64 *string `json:"from_base64,omitempty" jsonschema:"from as base64"`
	To         *string `json:"to,omitempty" jsonschema:"new path, which must not exist; required unless to_base64"`
	ToBase64   *string `json:"to_base64,omitempty" jsonschema:"to as base64"`
	Recursive  *bool   `json:"recursive,omitempty" jsonschema:"copy a directory and everything in it"`
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

// fs_patch

type patchIn struct {
	Patch          string             `json:"patch" jsonschema:"a unified diff as diff -u or git diff write it; one or more files"`
	Encoding       *string            `json:"encoding,omitempty" jsonschema:"how patch is encoded; default utf8 (base64 for bytes that are not UTF-8)"`
	IfSHA256       map[string]*string `json:"if_sha256,omitempty" jsonschema:"every path the patch touches, as the patch names it, to its sha256 now, or to null for a file the patch creates; a dry run needs none and answers them"`
	IfSHA256Base64 map[string]*string `json:"if_sha256_base64,omitempty" jsonschema:"as if_sha256, keyed by each path as base64, for names that are not UTF-8"`
	DryRun         *bool              `json:"dry_run,omitempty" jsonschema:"change nothing; answer each file's sha256, size and diff, and the if_sha256 the real call needs"`
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
	doc := newObj().bool("ok", true)
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

// ifSHA writes a dry run's if_sha256 for the real call: each file's
// current sha256, or null for one the patch creates; names that are not
// UTF-8 go into if_sha256_base64, keyed by the name in base64.
func ifSHA(doc *obj, files []*fsmcpv1.PatchFile) {
	text, b64 := newObj(), newObj()
	for _, f := range files {
		o, k := text, string(f.GetPath())
		if !utf8.Valid(f.GetPath()) {
			o, k = b64, base64.StdEncoding.EncodeToString(f.GetPath())
		}
		if f.GetCreated() {
			o.rawValue(k, []byte("null"))
		} else {
			o.str(k, f.GetCurrentSha256())
		}
	}
	doc.object("if_sha256", text)
	if b64.n > 0 {
		doc.object("if_sha256_base64", b64)
	}
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
