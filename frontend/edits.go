package frontend

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/fsmcp/fsmcp/proto/link"
)

// What the editing tools of the contract's "Editing like an agent edits"
// share: the file and precondition fs_write and fs_splice take, the dry
// run's diff, and the guards of fs_delete and fs_move.

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
	if !link.IsSHA256Hex(*ifSHA) {
		return "", false, invalidf("if_sha256 must be 64 lowercase hex digits (a sha256 from fs_stat) or null to create the file")
	}
	return *ifSHA, false, nil
}

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

// guardArgs checks the optional preconditions of fs_delete and fs_move.
func guardArgs(ifSHA, ifTree *string) (string, string, error) {
	var a, b string
	if ifSHA != nil {
		if !link.IsSHA256Hex(*ifSHA) {
			return "", "", invalidf("if_sha256 must be 64 lowercase hex digits")
		}
		a = *ifSHA
	}
	if ifTree != nil {
		if !link.IsSHA256Hex(*ifTree) {
			return "", "", invalidf("if_tree_sha256 must be 64 lowercase hex digits")
		}
		b = *ifTree
	}
	if a != "" && b != "" {
		return "", "", invalidf("give if_sha256 (a file) or if_tree_sha256 (a directory), not both")
	}
	return a, b, nil
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
