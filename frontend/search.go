package frontend

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type globIn struct {
	Pattern    string  `json:"pattern" jsonschema:"an rg glob, e.g. **/*.go or !*_test.go, matched below path"`
	Path       *string `json:"path,omitempty" jsonschema:"directory relative to the root; default the root"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Hidden     *bool   `json:"hidden,omitempty" jsonschema:"also list hidden files and directories"`
	NoIgnore   *bool   `json:"no_ignore,omitempty" jsonschema:"do not honour .gitignore, .ignore and .rgignore files"`
	Cursor     *string `json:"cursor,omitempty" jsonschema:"the cursor of a truncated reply, to continue after it"`
}

type grepIn struct {
	Pattern    string   `json:"pattern" jsonschema:"a regular expression (rg syntax), or text with literal"`
	Path       *string  `json:"path,omitempty" jsonschema:"directory or file relative to the root; default the root"`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Glob       []string `json:"glob,omitempty" jsonschema:"rg globs choosing the files searched, e.g. [\"*.go\", \"!*_test.go\"]; a later glob wins, and a glob naming a hidden or ignored file re-includes it, as in rg"`
	Literal    *bool    `json:"literal,omitempty" jsonschema:"the pattern is text, not a regular expression"`
	IgnoreCase *bool    `json:"ignore_case,omitempty" jsonschema:"match without regard to case"`
	MaxCount   *int64   `json:"max_count,omitempty" jsonschema:"stop after this many matching lines in each file"`
	Context    *int64   `json:"context,omitempty" jsonschema:"also return this many lines before and after each match"`
	Hidden     *bool    `json:"hidden,omitempty" jsonschema:"also search hidden files and directories"`
	NoIgnore   *bool    `json:"no_ignore,omitempty" jsonschema:"do not honour .gitignore, .ignore and .rgignore files"`
	Cursor     *string  `json:"cursor,omitempty" jsonschema:"the cursor of a truncated reply, to continue after it"`
}

// maxContext bounds the context lines asked for around each match.
const maxContext = 1000

func searchTools() []*tool {
	return []*tool{
		defineTool("fs_glob", "Files below path whose path matches an rg glob (rg --files), sorted by path bytes, "+
			"relative to the root. Hidden and ignored files are left out unless asked for; a glob naming one "+
			"re-includes it, as in rg. A truncated reply carries a cursor to continue.",
			true, false, true, (*server).glob),
		defineTool("fs_grep", "Search file contents with ripgrep. One result per matching (or context) line, sorted "+
			"by path and then offset: path, line_number, offset (byte offset of the line in the file), the line "+
			"as text (or text_base64 when it is not UTF-8) with its line terminator, and each submatch's byte "+
			"start and end in the line. A line longer than the reply allows is cut (text_truncated, line_length); "+
			"fs_read reads it whole. Totals: files_searched (as rg reports it: rg 13 counts only files with "+
			"results) and matches (matching lines). A truncated reply carries a cursor to continue.",
			true, false, true, (*server).grep),
	}
}

func boolArg(b *bool) bool { return b != nil && *b }

// progressFunc returns a function that sends MCP progress notifications
// for the call, or one that does nothing when the client sent no token.
func progressFunc(ctx context.Context, req *mcp.CallToolRequest) func(progress float64, message string) {
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	if token == nil || req.Session == nil {
		return func(float64, string) {}
	}
	return func(progress float64, message string) {
		// A failed notification must not fail the search.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: progress, Message: message,
		})
	}
}

// searchMessage is what Glob and Grep stream: progress, then one message
// marked done that carries the page.
type searchMessage interface {
	GetDone() bool
	GetProgress() *fsmcpv1.Progress
}

// finalMessage reads a search stream up to its page, passing each progress
// message to progress.
func finalMessage[M searchMessage](stream interface{ Recv() (M, error) }, progress func(*fsmcpv1.Progress)) (M, error) {
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			var zero M
			return zero, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "the worker ended the search without a reply")
		}
		if err != nil || m.GetDone() {
			return m, err
		}
		if pr := m.GetProgress(); pr != nil {
			progress(pr)
		}
	}
}

func (s *server) glob(ctx context.Context, in *globIn, req *mcp.CallToolRequest) (*obj, error) {
	p, err := pathArg("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	after, hasAfter, err := parseCursor(in.Cursor)
	if err != nil {
		return nil, err
	}
	stream, err := s.wc.Glob(ctx, &fsmcpv1.GlobRequest{Pattern: in.Pattern, Path: p, Hidden: boolArg(in.Hidden),
		NoIgnore: boolArg(in.NoIgnore), After: after, HasAfter: hasAfter, MaxBytes: s.cfg.MaxResponseBytes})
	if err != nil {
		return nil, err
	}
	notify := progressFunc(ctx, req)
	resp, err := finalMessage(stream, func(pr *fsmcpv1.Progress) {
		notify(float64(pr.GetFilesSearched()), fmt.Sprintf("%d files listed", pr.GetFilesSearched()))
	})
	if err != nil {
		return nil, err
	}

	max := int(s.cfg.MaxResponseBytes)
	doc := pageObj(max)
	doc.bool("ok", true).name("path", displayPath(p))
	doc.key("files")
	doc.b = append(doc.b, '[')
	tail := len(`,"total":,"unreadable":`) + 2*20 + pageTail
	var last []byte
	truncated := resp.GetMore()
	item := &obj{b: make([]byte, 0, 256)}
	for i, path := range resp.GetPaths() {
		item.reset()
		item.name("path", path)
		item.b = append(item.b, '}')
		if len(doc.b)+1+len(item.b)+tail+base64.RawURLEncoding.EncodedLen(len(path)) > max {
			truncated = true
			break
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, item.b...)
		last = path
	}
	doc.b = append(doc.b, ']')
	doc.int("total", resp.GetTotal())
	if n := resp.GetErrors(); n > 0 {
		doc.int("unreadable", n)
	}
	if truncated {
		if last == nil {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one path does not fit in --max-response-bytes")
		}
		doc.bool("truncated", true).str("cursor", cursorFor(last))
	}
	return doc, nil
}

// grepCursor encodes the position after a line: its offset, then its path.
func grepCursor(path []byte, offset int64) string {
	b := binary.AppendUvarint(nil, uint64(offset))
	return cursorFor(append(b, path...))
}

func parseGrepCursor(c *string) (path []byte, offset int64, ok bool, err error) {
	b, ok, err := parseCursor(c)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	off, n := binary.Uvarint(b)
	if n <= 0 || n == len(b) || off > 1<<62 {
		return nil, 0, false, invalidf("cursor: not a cursor this server issued")
	}
	return b[n:], int64(off), true, nil
}

func (s *server) grep(ctx context.Context, in *grepIn, req *mcp.CallToolRequest) (*obj, error) {
	p, err := pathArg("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	afterPath, afterOffset, hasAfter, err := parseGrepCursor(in.Cursor)
	if err != nil {
		return nil, err
	}
	var maxCount, context int64
	if in.MaxCount != nil {
		if maxCount = *in.MaxCount; maxCount < 1 {
			return nil, invalidf("max_count must be at least 1")
		}
	}
	if in.Context != nil {
		if context = *in.Context; context < 0 || context > maxContext {
			return nil, invalidf("context must be between 0 and %d", maxContext)
		}
	}
	stream, err := s.wc.Grep(ctx, &fsmcpv1.GrepRequest{
		Pattern: in.Pattern, Path: p, Globs: in.Glob, Literal: boolArg(in.Literal), IgnoreCase: boolArg(in.IgnoreCase),
		MaxCount: maxCount, Context: int32(context), Hidden: boolArg(in.Hidden), NoIgnore: boolArg(in.NoIgnore),
		AfterPath: afterPath, AfterOffset: afterOffset, HasAfter: hasAfter, MaxBytes: s.cfg.MaxResponseBytes,
	})
	if err != nil {
		return nil, err
	}
	notify := progressFunc(ctx, req)
	resp, err := finalMessage(stream, func(pr *fsmcpv1.Progress) {
		notify(float64(pr.GetMatches()), fmt.Sprintf("%d files with results, %d matching lines so far",
			pr.GetFilesSearched(), pr.GetMatches()))
	})
	if err != nil {
		return nil, err
	}
	return s.grepPage(p, resp)
}

// grepPage renders the worker's page, cut to --max-response-bytes at a
// whole line. A first line too long for the reply on its own is cut to
// fit, so that every page makes progress.
func (s *server) grepPage(p []byte, resp *fsmcpv1.GrepResponse) (*obj, error) {
	max := int(s.cfg.MaxResponseBytes)
	doc := pageObj(max)
	doc.bool("ok", true).name("path", displayPath(p))
	doc.key("results")
	doc.b = append(doc.b, '[')
	tail := len(`,"files_searched":,"matches":,"unreadable":`) + 3*20 + pageTail +
		base64.RawURLEncoding.EncodedLen(binary.MaxVarintLen64)
	var last *fsmcpv1.GrepLine
	truncated := resp.GetMore()
	buf := &obj{b: make([]byte, 0, 1024)}
	for i, l := range resp.GetLines() {
		fixed := len(doc.b) + 1 + tail + base64.RawURLEncoding.EncodedLen(len(l.GetPath()))
		item := grepItem(buf, l, l.GetText())
		if fixed+len(item) > max {
			if i > 0 {
				truncated = true
				break
			}
			if item = fitGrepItem(l, max-fixed); item == nil {
				return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one result does not fit in --max-response-bytes")
			}
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, item...)
		last = l
	}
	doc.b = append(doc.b, ']')
	doc.int("files_searched", resp.GetFilesSearched()).int("matches", resp.GetMatches())
	if n := resp.GetErrors(); n > 0 {
		doc.int("unreadable", n)
	}
	if truncated {
		if last == nil {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "BUG(fsmcp): an empty page with more to come")
		}
		doc.bool("truncated", true).str("cursor", grepCursor(last.GetPath(), last.GetOffset()))
	}
	return doc, nil
}

// grepItem renders into o one line with text, which is all or the first
// bytes of the line's text, and returns the rendering, valid until o is
// reused.
func grepItem(o *obj, l *fsmcpv1.GrepLine, text []byte) []byte {
	typ := "match"
	if l.GetContext() {
		typ = "context"
	}
	o.reset()
	o.str("type", typ).name("path", l.GetPath()).
		int("line_number", l.GetLineNumber()).int("offset", l.GetOffset())
	if utf8.Valid(text) {
		o.key("text")
		o.b = appendString(o.b, text)
	} else {
		o.key("text_base64")
		o.b = append(o.b, '"')
		o.b = base64.StdEncoding.AppendEncode(o.b, text)
		o.b = append(o.b, '"')
	}
	if n := l.GetLineLength(); n > int64(len(text)) {
		o.bool("text_truncated", true).int("line_length", n)
	}
	o.key("submatches")
	o.b = append(o.b, '[')
	for i, m := range l.GetSubmatches() {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = append(o.b, `{"start":`...)
		o.b = strconv.AppendInt(o.b, m.GetStart(), 10)
		o.b = append(o.b, `,"end":`...)
		o.b = strconv.AppendInt(o.b, m.GetEnd(), 10)
		o.b = append(o.b, '}')
	}
	o.b = append(o.b, ']')
	if l.GetSubmatchesTruncated() {
		o.bool("submatches_truncated", true)
	}
	o.b = append(o.b, '}')
	return o.b
}

// reset empties o for reuse.
func (o *obj) reset() {
	o.b = append(o.b[:0], '{')
	o.n = 0
}

// pageObj returns an empty document with room for a page of up to max
// bytes, so that building it does not copy it over and over.
func pageObj(max int) *obj {
	return &obj{b: append(make([]byte, 0, min(max, 1<<20)+64), '{')}
}

// fitGrepItem renders l with as much of its text as fits in avail bytes,
// or returns nil if not even an empty text fits.
func fitGrepItem(l *fsmcpv1.GrepLine, avail int) []byte {
	bare := grepItem(&obj{}, &fsmcpv1.GrepLine{Path: l.GetPath(), LineNumber: l.GetLineNumber(), Offset: l.GetOffset(),
		Context: l.GetContext(), LineLength: max(l.GetLineLength(), 1), Submatches: l.GetSubmatches(),
		SubmatchesTruncated: l.GetSubmatchesTruncated()}, nil)
	// The text key may become text_base64: allow for the longer name.
	room := avail - len(bare) - len(`_base64`)
	if room < 0 {
		return nil
	}
	n, _, _ := fitContent(l.GetText(), room)
	item := grepItem(&obj{}, l, l.GetText()[:n])
	if len(item) > avail {
		return nil
	}
	return item
}
