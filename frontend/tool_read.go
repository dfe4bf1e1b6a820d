package frontend

import (
	"context"
	"encoding/base64"
	"slices"
	"sort"

	"github.com/fsmcp/fsmcp/proto/charset"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type readIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file; required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Offset     *int64  `json:"offset,omitempty" jsonschema:"first byte; default 0"`
	Length     *int64  `json:"length,omitempty" jsonschema:"bytes; default: as many as one reply holds"`
	Line       *int64  `json:"line,omitempty" jsonschema:"first line instead of offset, 1-based; -1 is the last"`
	Lines      *int64  `json:"lines,omitempty" jsonschema:"with line: how many; default as many as fit"`
	IfSHA256   *string `json:"if_sha256,omitempty" jsonschema:"sha256 of an earlier reply: refused if the file changed since"`
	Charset    *string `json:"charset,omitempty" jsonschema:"decode the bytes from this charset into text; offsets stay in the file's bytes"`
}

var readTool = toolDecl[readIn]{
	name:  "fs_read",
	title: "Read file",
	description: "Read a file by lines (line, lines) or bytes (offset, length), as utf8 text or base64. " +
		"Lines are numbered as fs_grep's line_number. When truncated is true, call again with next_line (or " +
		"next_offset). The reply's sha256 is the if_sha256 for later pages and for fs_write or fs_replace. " +
		"Binary: 4 KiB unless length.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).read,
}

func (s *server) read(ctx context.Context, in *readIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	if in.Charset != nil && *in.Charset != charset.UTF8 {
		return s.readCharset(ctx, p, in, *in.Charset)
	}
	req, err := readRequest(p, in, s.cfg.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	doc, _, _ := readReply(newObj().bool("ok", true).name("path", displayPath(p)), req, in.Length, resp, int(s.cfg.MaxResponseBytes), defaultBinaryPage)
	return doc, nil
}

// readRequest checks a read's arguments and builds its request, asking for
// at most bound bytes.
func readRequest(p []byte, in *readIn, bound int64) (*fsmcpv1.ReadRequest, error) {
	req := &fsmcpv1.ReadRequest{Path: p, Length: bound}
	if in.Offset != nil {
		req.Offset = *in.Offset
	}
	if in.Length != nil {
		req.Length = min(*in.Length, bound)
	}
	if req.Offset < 0 || req.Length < 0 {
		return nil, invalidf("offset and length must not be negative")
	}
	if in.Line != nil {
		switch {
		case in.Offset != nil:
			return nil, invalidf("give line or offset, not both")
		case in.Length != nil:
			return nil, invalidf("with line, give lines (a count of lines), not length")
		case *in.Line == 0:
			return nil, invalidf("line is 1-based; -1 is the last line")
		}
		req.ByLine, req.Line = true, *in.Line
	}
	if in.Lines != nil {
		if in.Line == nil {
			return nil, invalidf("lines needs line")
		}
		if req.Lines = *in.Lines; req.Lines < 1 {
			return nil, invalidf("lines must be at least 1")
		}
	}
	if in.IfSHA256 != nil {
		if !link.IsSHA256Hex(*in.IfSHA256) {
			return nil, invalidf("if_sha256 must be 64 lowercase hex digits")
		}
		req.IfSha256 = *in.IfSHA256
	}
	return req, nil
}

// readOverhead is the most a read reply's fields other than path and
// content take, with room for the largest numbers.
const readOverhead = len(`,"content":"","encoding":"base64","offset":,"length":,"size":,"eof":false,"truncated":true,"next_offset":`+
	`,"first_line":,"line_count":,"next_line":,"text_truncated":true,"line_length":,"binary":true,"sha256":""`) + 8*20 + 64

// defaultBinaryPage is the most a read without length answers of bytes
// that are not UTF-8 text: 4 KiB, 5.5 KB of base64.
const defaultBinaryPage = 4096

// readReply completes head, which holds the fields before the content,
// with the worker's reply to req, fitted into max bytes; of bytes that are
// not text, read without length, at most binaryPage (0: no such bound).
// A line read is cut after a whole line; only a first line that does not
// fit alone is cut inside, on a character boundary, and says
// text_truncated.
func readReply(head *obj, req *fsmcpv1.ReadRequest, length *int64, resp *fsmcpv1.ReadResponse, max int, binaryPage int) (doc *obj, n int, truncated bool) {
	data := resp.GetData()
	size, offset := resp.GetSize(), resp.GetOffset()
	asked := size - offset
	if length != nil {
		asked = min(*length, asked)
	}
	if int64(len(data)) < asked && !req.GetByLine() {
		// The worker stopped at its bound, not where the client asked:
		// don't let that cut turn a UTF-8 range into base64.
		data = trimPartialRune(data)
	}
	avail := max - head.size() - readOverhead
	n, encoded, encoding := fitContent(data, avail)
	shortBinary := false
	if binaryPage > 0 && encoding == "base64" && length == nil && !req.GetByLine() && n > binaryPage {
		// Bytes that are not text are a poor use of an agent's context:
		// without length, a short page, and the reply says so.
		n, encoded, encoding = fitContent(data[:binaryPage], avail)
		shortBinary = true
	}
	ends := resp.GetLineEnds()
	lineCount := 0
	if req.GetByLine() {
		// The whole lines that fit: shortening a range can change its
		// encoding, so fit again until the cut stays on a line end.
		lineCount = sort.Search(len(ends), func(i int) bool { return ends[i] > int64(n) })
		for lineCount > 0 && ends[lineCount-1] != int64(n) {
			n, encoded, encoding = fitContent(data[:ends[lineCount-1]], avail)
			lineCount = sort.Search(len(ends), func(i int) bool { return ends[i] > int64(n) })
		}
		if lineCount == 0 && n > 0 {
			// One line, cut: its first bytes, labelled.
			lineCount = 1
		}
	}
	data = data[:n]
	doc = head
	// The whole document in one allocation: the page is not copied over
	// and over as it grows.
	doc.b = slices.Grow(doc.b, readOverhead+encoded)
	doc.key("content")
	if encoding == "utf8" {
		doc.b = jsontext.AppendString(doc.b, data)
	} else {
		doc.b = append(doc.b, '"')
		doc.b = base64.StdEncoding.AppendEncode(doc.b, data)
		doc.b = append(doc.b, '"')
	}
	end := offset + int64(n)
	eof := end >= size
	doc.str("encoding", encoding).int("offset", offset).int("length", int64(n)).int("size", size).bool("eof", eof)
	cutLine := req.GetByLine() && lineCount > 0 && (len(ends) == 0 || ends[0] > int64(n))
	truncated = !req.GetByLine() && int64(n) < asked ||
		req.GetByLine() && !eof && (req.GetLines() == 0 || int64(lineCount) < req.GetLines() || cutLine)
	if truncated {
		doc.bool("truncated", true)
	}
	if !eof {
		doc.int("next_offset", end)
	}
	if req.GetByLine() {
		doc.int("first_line", resp.GetFirstLine()).int("line_count", int64(lineCount))
		lineEnd := end
		if cutLine {
			lineLen := resp.GetLineLength()
			if len(ends) > 0 {
				lineLen = ends[0]
			}
			lineEnd = offset + lineLen
			doc.bool("text_truncated", true).int("line_length", lineLen)
		}
		if lineEnd < size {
			doc.int("next_line", resp.GetFirstLine()+int64(lineCount))
		}
	}
	if shortBinary {
		doc.bool("binary", true)
	}
	if shortBinary {
		doc.bool("binary", true)
	}
	if resp.GetSha256() != "" {
		doc.str("sha256", resp.GetSha256())
	} else {
		doc.bool("sha256_omitted", true)
	}
	return doc, n, truncated
}
