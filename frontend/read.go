package frontend

import (
	"context"
	"encoding/base64"
	"slices"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type statIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"path relative to the root; empty or . names the root"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
}

type listIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"directory relative to the root; empty or . names the root"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Cursor     *string `json:"cursor,omitempty" jsonschema:"the cursor of a truncated reply, to continue after it"`
}

type readIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file relative to the root"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Offset     *int64  `json:"offset,omitempty" jsonschema:"first byte to read; default 0"`
	Length     *int64  `json:"length,omitempty" jsonschema:"bytes to read; default to the end of the file"`
}

func readTools() []*tool {
	return []*tool{
		defineTool("fs_stat", "lstat one path: type, size, mtime, mode, nlink; sha256 of a regular file; "+
			"a symlink's target when it stays inside the root. On the root, also the enforced confinement.",
			true, false, true, (*server).stat),
		defineTool("fs_list", "One directory's immediate entries, sorted by name bytes: name, type, size, mtime, mode. "+
			"A truncated reply carries a cursor to continue.",
			true, false, true, (*server).list),
		defineTool("fs_read", "A byte range of a regular file. encoding is utf8 when the range is valid UTF-8, else base64. "+
			"A truncated reply carries next_offset.",
			true, false, true, (*server).read),
	}
}

func entryFields(o *obj, e *fsmcpv1.Entry) *obj {
	return o.str("type", typeName(e.GetType())).
		int("size", e.GetSize()).
		str("mtime", formatTime(e.GetMtimeUnixNano())).
		str("mode", formatMode(e.GetMode()))
}

func (s *server) stat(ctx context.Context, in *statIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := pathArg("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Stat(ctx, &fsmcpv1.StatRequest{Path: p})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).name("path", displayPath(p))
	entryFields(doc, resp.GetEntry()).int("nlink", int64(resp.GetEntry().GetNlink()))
	if resp.GetSha256() != "" {
		doc.str("sha256", resp.GetSha256())
	}
	if resp.GetHasTarget() {
		doc.name("target", resp.GetTarget())
	}
	if resp.GetTargetEscapes() {
		doc.bool("target_escapes", true)
	}
	if c := resp.GetConfinement(); c != nil {
		doc.object("confinement", confinementDoc(c, s.cfg.ReadOnly))
	}
	return doc, nil
}

func confinementDoc(c *fsmcpv1.Confinement, readOnly bool) *obj {
	return newObj().
		int("landlock_abi", int64(c.GetLandlockAbi())).
		int("kernel_landlock_abi", int64(c.GetKernelLandlockAbi())).
		bool("read_only", readOnly).
		bool("read_only_enforced", c.GetReadOnlyEnforced()).
		bool("network_denied", c.GetNetworkDenied()).
		str("seccomp", c.GetSeccomp()).
		int("seccomp_denied_syscalls", int64(c.GetSeccompDeniedSyscalls())).
		str("rg_version", c.GetRgVersion())
}

// cursorFor encodes a continuation point; the client treats it as opaque.
func cursorFor(after []byte) string { return base64.RawURLEncoding.EncodeToString(after) }

func parseCursor(c *string) ([]byte, bool, error) {
	if c == nil {
		return nil, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(*c)
	if err != nil || len(b) == 0 {
		return nil, false, invalidf("cursor: not a cursor this server issued")
	}
	return b, true, nil
}

// pageTail is the most a truncated page adds after its last item, besides
// the cursor itself.
const pageTail = len(`],"truncated":true,"cursor":""}`)

func (s *server) list(ctx context.Context, in *listIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := pathArg("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	after, hasAfter, err := parseCursor(in.Cursor)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.List(ctx, &fsmcpv1.ListRequest{Path: p, After: after, HasAfter: hasAfter, MaxBytes: s.cfg.MaxResponseBytes})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).name("path", displayPath(p))
	doc.key("entries")
	doc.b = append(doc.b, '[')
	max := int(s.cfg.MaxResponseBytes)
	var last []byte
	truncated := resp.GetMore()
	for i, e := range resp.GetEntries() {
		item := entryFields(newObj().name("name", e.GetName()), e).bytes()
		need := len(doc.b) + 1 + len(item) + pageTail + base64.RawURLEncoding.EncodedLen(len(e.GetName()))
		if need > max {
			truncated = true
			break
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, item...)
		last = e.GetName()
	}
	doc.b = append(doc.b, ']')
	if truncated {
		if last == nil {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one entry does not fit in --max-response-bytes")
		}
		doc.bool("truncated", true).str("cursor", cursorFor(last))
	}
	return doc, nil
}

func (s *server) read(ctx context.Context, in *readIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := pathArg("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	var offset int64
	if in.Offset != nil {
		offset = *in.Offset
	}
	length := s.cfg.MaxResponseBytes
	if in.Length != nil {
		length = min(*in.Length, length)
	}
	if offset < 0 || length < 0 {
		return nil, invalidf("offset and length must not be negative")
	}
	resp, err := s.wc.Read(ctx, &fsmcpv1.ReadRequest{Path: p, Offset: offset, Length: length})
	if err != nil {
		return nil, err
	}
	data := resp.GetData()
	size := resp.GetSize()
	asked := size - offset
	if in.Length != nil {
		asked = min(*in.Length, asked)
	}
	if int64(len(data)) < asked {
		// The worker stopped at its bound, not where the client asked:
		// don't let that cut turn a UTF-8 range into base64.
		data = trimPartialRune(data)
	}
	// Everything but the content, with room for the largest numbers and
	// the truncation fields.
	head := newObj().bool("ok", true).name("path", displayPath(p))
	overhead := head.size() + len(`,"content":"","encoding":"base64","offset":,"length":,"size":,"eof":false,"truncated":true,"next_offset":`) + 4*20
	n, encoded, encoding := fitContent(data, int(s.cfg.MaxResponseBytes)-overhead)
	data = data[:n]
	doc := head
	// The whole document in one allocation: the page is not copied over
	// and over as it grows.
	doc.b = slices.Grow(doc.b, overhead+encoded)
	if encoding == "utf8" {
		doc.key("content")
		doc.b = appendString(doc.b, data)
	} else {
		doc.key("content")
		doc.b = append(doc.b, '"')
		doc.b = base64.StdEncoding.AppendEncode(doc.b, data)
		doc.b = append(doc.b, '"')
	}
	end := offset + int64(n)
	eof := end >= size
	doc.str("encoding", encoding).int("offset", offset).int("length", int64(n)).int("size", size).bool("eof", eof)
	if int64(n) < asked {
		doc.bool("truncated", true)
	}
	if !eof {
		doc.int("next_offset", end)
	}
	return doc, nil
}

// fitContent returns how many leading bytes of data fit in avail bytes of
// encoded JSON string content, their encoded length, and the encoding
// judged on exactly those bytes: utf8 if valid UTF-8, else base64. A UTF-8
// range is cut only at a rune boundary, so the shortened range stays valid.
func fitContent(data []byte, avail int) (n, encoded int, encoding string) {
	if avail < 0 {
		avail = 0
	}
	if !utf8.Valid(data) {
		n := min(len(data), avail/4*3)
		if !utf8.Valid(data[:n]) {
			return n, base64.StdEncoding.EncodedLen(n), "base64"
		}
		data = data[:n]
	}
	// data is valid UTF-8: a multi-byte rune costs its bytes, an ASCII
	// byte its escape. Past the budget, the cut backs up to the start of
	// the rune that did not fit.
	used := 0
	for i, c := range data {
		cost := escapedLen(c)
		if used+cost > avail {
			for i > 0 && !utf8.RuneStart(data[i]) {
				i--
				used--
			}
			return i, used, "utf8"
		}
		used += cost
	}
	return len(data), used, "utf8"
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of data.
func trimPartialRune(data []byte) []byte {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return data[:i]
			}
			break
		}
	}
	return data
}
