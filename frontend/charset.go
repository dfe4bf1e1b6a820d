package frontend

import (
	"context"
	"errors"
	"sort"

	"github.com/fsmcp/fsmcp/proto/charset"
	"github.com/fsmcp/fsmcp/proto/jsontext"
)

// charsetArg is the charset a write or replace names for the worker: ""
// for UTF-8 (the bytes as given). Text in a charset is text, so it comes
// as utf8, never as base64.
func charsetArg(cs, encoding *string) (string, error) {
	if cs == nil || *cs == charset.UTF8 {
		return "", nil
	}
	if encoding != nil && *encoding == "base64" {
		return "", invalidf("charset encodes text; with encoding base64 the bytes are written as they are, so give one or the other")
	}
	return *cs, nil
}

// readCharset answers fs_read with charset: the worker's bytes decoded
// into text, exactly (charset.DecodePrefix), or invalid_argument with the
// file offset where they stop round-tripping. Offsets, lengths and line
// numbers stay in the file's bytes; a page ends at a whole character (and
// for a line read, at a whole line when one fits).
func (s *server) readCharset(ctx context.Context, p []byte, in *readIn, cs string) (*obj, error) {
	max := int(s.cfg.MaxResponseBytes)
	// Decoded text is at most twice its bytes (before JSON escapes): ask
	// for half of what a reply holds.
	req, err := readRequest(p, in, s.cfg.MaxResponseBytes/2)
	if err != nil {
		return nil, err
	}
	if req.GetByLine() && !charset.LineBytes(cs) {
		return nil, invalidf("line and lines need a charset whose bytes show line ends; read %s by offset and length", cs)
	}
	resp, err := s.wc.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	head := newObj().bool("ok", true).name("path", displayPath(p))
	avail := max - head.size() - readOverhead - len(`,"charset":""`) - len(cs)
	data, ends := resp.GetData(), resp.GetLineEnds()
	var text []byte
	n := len(data)
	for {
		var ce *charset.Error
		text, n, err = charset.DecodePrefix(cs, data[:n])
		if errors.As(err, &ce) {
			off := resp.GetOffset() + ce.Offset
			e := invalidf("the file is not %s from byte offset %d: its bytes there do not round-trip (not %s, or a sequence with two encodings); "+
				"read them without charset", cs, off, cs)
			e.offset = &off
			return nil, e
		}
		if err != nil {
			return nil, invalidf("%v", err)
		}
		if req.GetByLine() && n < len(data) {
			// Back to the last whole line, if one fits.
			if k := sort.Search(len(ends), func(i int) bool { return ends[i] > int64(n) }); k > 0 && ends[k-1] != int64(n) {
				n = int(ends[k-1])
				continue
			}
		}
		encoded := len(jsontext.AppendString(nil, text)) - 2
		if encoded <= avail || n == 0 {
			break
		}
		n = n * avail / encoded * 9 / 10
	}
	size, offset := resp.GetSize(), resp.GetOffset()
	end := offset + int64(n)
	eof := end >= size
	doc := head
	doc.key("content")
	doc.b = jsontext.AppendString(doc.b, text)
	doc.str("encoding", "utf8").str("charset", cs).int("offset", offset).int("length", int64(n)).int("size", size).bool("eof", eof)
	asked := size - offset
	if in.Length != nil {
		asked = min(*in.Length, asked)
	}
	lineCount := 0
	if req.GetByLine() {
		lineCount = sort.Search(len(ends), func(i int) bool { return ends[i] > int64(n) })
	}
	cutLine := req.GetByLine() && lineCount == 0 && n > 0 && !eof
	if !req.GetByLine() && int64(n) < asked || req.GetByLine() && !eof && (req.GetLines() == 0 || int64(lineCount) < req.GetLines() || cutLine) {
		doc.bool("truncated", true)
	}
	if !eof {
		doc.int("next_offset", end)
	}
	if req.GetByLine() {
		if cutLine {
			lineCount = 1
			doc.bool("text_truncated", true)
		}
		doc.int("first_line", resp.GetFirstLine()).int("line_count", int64(lineCount))
		if !eof && !cutLine {
			doc.int("next_line", resp.GetFirstLine()+int64(lineCount))
		}
	}
	if resp.GetSha256() != "" {
		doc.str("sha256", resp.GetSha256())
	} else {
		doc.bool("sha256_omitted", true)
	}
	return doc, nil
}
