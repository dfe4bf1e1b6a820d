package frontend

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type grepIn struct {
	Pattern    string   `json:"pattern" jsonschema:"regular expression (Rust syntax), or text with literal"`
	Path       *string  `json:"path,omitempty" jsonschema:"root if left out, \"\" or \".\""`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Glob       []string `json:"glob,omitempty" jsonschema:"globs choosing files, e.g. [\"*.go\", \"!*_test.go\"]; the last match wins"`
	Literal    *bool    `json:"literal,omitempty" jsonschema:"pattern is plain text"`
	IgnoreCase *bool    `json:"ignore_case,omitempty" jsonschema:"case-insensitive"`
	MaxCount   *int64   `json:"max_count,omitempty" jsonschema:"matching lines per file, at most"`
	Context    *int64   `json:"context,omitempty" jsonschema:"lines before and after each match"`
	Before     *int64   `json:"before,omitempty" jsonschema:"lines before each match; overrides context on that side"`
	After      *int64   `json:"after,omitempty" jsonschema:"lines after each match; overrides context on that side"`
	Output     *string  `json:"output,omitempty" jsonschema:"matches (default), files (each file with its count) or count (the total, and per file)"`
	Type       *string  `json:"type,omitempty" jsonschema:"only files of one of rg's built-in types, e.g. go, py, js, md"`
	Multiline  *bool    `json:"multiline,omitempty" jsonschema:"the pattern may match across lines"`
	Hidden     *bool    `json:"hidden,omitempty" jsonschema:"include hidden files"`
	NoIgnore   *bool    `json:"no_ignore,omitempty" jsonschema:"include .gitignored files"`
	MaxResults *int64   `json:"max_results,omitempty" jsonschema:"results of the whole search, at most: matching lines (files with output files); pass it again with cursor"`
	Cursor     *string  `json:"cursor,omitempty" jsonschema:"cursor from a truncated reply"`
}

// maxContext bounds the context lines asked for around each match.
const maxContext = 1000

var grepTool = toolDecl[grepIn]{
	name:  "fs_grep",
	title: "Search contents",
	description: "Search file contents for a regular expression, or text with literal. Each result " +
		"is one line: path, line_number, offset (of the line, for fs_read), text and submatch byte ranges. " +
		"On a large tree, try output files first. When truncated is true, call again with the reply's cursor. To find files by name use fs_glob.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).grep,
}

func (s *server) grep(ctx context.Context, in *grepIn, req *mcp.CallToolRequest) (*obj, error) {
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	afterPath, afterOffset, returned, hasAfter, err := parseGrepCursor(in.Cursor, in.MaxResults != nil)
	if err != nil {
		return nil, err
	}
	var bound *resultBound
	if in.MaxResults != nil {
		// The schema holds it at 1 or more.
		bound = &resultBound{max: *in.MaxResults, returned: returned}
	}
	// The schema holds both within their bounds.
	var maxCount, context int64
	if in.MaxCount != nil {
		maxCount = *in.MaxCount
	}
	if in.Context != nil {
		context = *in.Context
	}
	before, after := context, context
	for _, side := range []struct {
		name string
		in   *int64
		out  *int64
	}{{"before", in.Before, &before}, {"after", in.After, &after}} {
		if side.in != nil {
			if *side.out = *side.in; *side.out < 0 || *side.out > maxContext {
				return nil, invalidf("%s must be between 0 and %d", side.name, maxContext)
			}
		}
	}
	output := fsmcpv1.GrepOutput_GREP_OUTPUT_MATCHES
	if in.Output != nil {
		switch *in.Output {
		case "matches":
		case "files":
			output = fsmcpv1.GrepOutput_GREP_OUTPUT_FILES
		case "count":
			output = fsmcpv1.GrepOutput_GREP_OUTPUT_COUNT
		default:
			return nil, invalidf("output must be matches, files or count")
		}
		if output != fsmcpv1.GrepOutput_GREP_OUTPUT_MATCHES && (in.Context != nil || in.Before != nil || in.After != nil) {
			return nil, invalidf("context, before and after apply only to output matches")
		}
		if output == fsmcpv1.GrepOutput_GREP_OUTPUT_COUNT && bound != nil {
			return nil, invalidf("max_results applies to output matches and files; output count counts every match")
		}
	}
	var fileType string
	if in.Type != nil {
		if fileType = *in.Type; !isTypeName(fileType) {
			return nil, invalidf("type must be the name of one of rg's built-in file types (rg --type-list), e.g. go")
		}
	}
	stream, err := s.wc.Grep(ctx, &fsmcpv1.GrepRequest{
		Pattern: in.Pattern, Path: p, Globs: in.Glob, Literal: boolArg(in.Literal), IgnoreCase: boolArg(in.IgnoreCase),
		MaxCount: maxCount, Before: int32(before), After: int32(after), Hidden: boolArg(in.Hidden), NoIgnore: boolArg(in.NoIgnore),
		AfterPath: afterPath, AfterOffset: afterOffset, HasAfter: hasAfter, MaxBytes: s.cfg.MaxResponseBytes,
		Output: output, Type: fileType, Multiline: boolArg(in.Multiline),
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
		return nil, translateRGHints(err, s.cfg.ToolsPrefix)
	}
	if output != fsmcpv1.GrepOutput_GREP_OUTPUT_MATCHES {
		return s.grepFilesPage(p, output, resp, bound)
	}
	return s.grepPage(p, resp, bound, after)
}

// rgHints are the advice rg appends to a pattern it refuses, naming its
// own flags, and what fs_grep's caller can do instead.
var rgHints = []struct{ advice, instead string }{
	{"Consider enabling multiline mode with the --multiline flag (or -U for short).\n" +
		"When multiline mode is enabled, new line characters can be matched.",
		"fs_grep matches one line at a time, so the pattern cannot contain a line terminator: " +
			"search for one line's text, then read around the result with fs_read"},
	{"Consider enabling PCRE2 with the --pcre2 flag, which can handle backreferences\nand look-around.",
		"fs_grep's patterns are Rust regular expressions, without look-around or backreferences: " +
			"rewrite the pattern without them, or search for literal text with literal: true"},
}

// translateRGHints replaces, in an invalid_argument from rg, the advice
// that names rg's flags with what the tool offers instead.
func translateRGHints(err error, toolsPrefix string) error {
	te := fromRPC(err)
	if te.code != fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT {
		return err
	}
	for _, h := range rgHints {
		if strings.Contains(te.message, h.advice) {
			c := *te
			c.message = strings.TrimSpace(strings.Replace(te.message, h.advice, prefixToolNames(h.instead, toolsPrefix), 1))
			return &c
		}
	}
	return err
}

// isTypeName reports whether t can name one of rg's built-in types: a
// short word, never an rg option or a type definition.
func isTypeName(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for _, c := range []byte(t) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '+' || c == '-') {
			return false
		}
	}
	return t[0] != '-'
}

// grepFilesPage renders a search by file: files with their count of
// matching lines, cut at a whole entry; count mode leads with the total.
// Files mode lists at most what bound leaves.
func (s *server) grepFilesPage(p []byte, output fsmcpv1.GrepOutput, resp *fsmcpv1.GrepResponse, bound *resultBound) (*obj, error) {
	max := int(s.cfg.MaxResponseBytes)
	doc := pageObj(max)
	doc.bool("ok", true).name("path", displayPath(p))
	field := "matches"
	if output == fsmcpv1.GrepOutput_GREP_OUTPUT_COUNT {
		doc.int("count", resp.GetMatches())
		field = "count"
	}
	doc.key("files")
	doc.b = append(doc.b, '[')
	// The cursor: an offset, and with max_results a count, then the path.
	tail := len(`,"files_matched":,"matches":,"unreadable":`) + 3*20 + pageTail +
		cursorLen(2*binary.MaxVarintLen64)
	var last []byte
	truncated := resp.GetMore()
	item := &obj{b: make([]byte, 0, 256)}
	left, reached, kept := bound.left(), false, int64(0)
	for i, f := range resp.GetFiles() {
		if kept == left {
			reached = true
			break
		}
		item.reset()
		item.name("path", f.GetPath()).int(field, f.GetCount())
		item.b = append(item.b, '}')
		if 1+len(item.b) > pageRoom(doc, max, tail, cursorLen(len(f.GetPath()))) {
			truncated = true
			break
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, item.b...)
		last = f.GetPath()
		kept++
	}
	doc.b = append(doc.b, ']')
	doc.int("files_matched", resp.GetFilesSearched())
	if output == fsmcpv1.GrepOutput_GREP_OUTPUT_FILES {
		doc.int("matches", resp.GetMatches())
	}
	if n := resp.GetErrors(); n > 0 {
		doc.int("unreadable", n)
	}
	// A page that ends at the bound with more to come ends the search.
	switch {
	case reached || truncated && kept == left:
		doc.bool("max_results_reached", true)
	case truncated:
		if last == nil {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one path does not fit in --max-response-bytes")
		}
		if bound != nil {
			bound.returned += kept
		}
		doc.bool("truncated", true).str("cursor", grepCursor(last, 0, bound))
	}
	return doc, nil
}

// grepPage renders the worker's page, cut to --max-response-bytes at a
// whole line. A first line too long for the reply on its own is cut to
// fit, so that every page makes progress. It returns at most the matching
// lines bound leaves, each with the context lines after it (after) that
// the page holds.
func (s *server) grepPage(p []byte, resp *fsmcpv1.GrepResponse, bound *resultBound, after int64) (*obj, error) {
	max := int(s.cfg.MaxResponseBytes)
	doc := pageObj(max)
	doc.bool("ok", true).name("path", displayPath(p))
	doc.key("results")
	doc.b = append(doc.b, '[')
	// The cursor: an offset, and with max_results a count, then the path.
	tail := len(`,"files_matched":,"matches":,"unreadable":`) + 3*20 + pageTail +
		cursorLen(2*binary.MaxVarintLen64)
	var last, lastMatch *fsmcpv1.GrepLine
	truncated := resp.GetMore()
	buf := &obj{b: make([]byte, 0, 1024)}
	left, reached, kept := bound.left(), false, int64(0)
	for i, l := range resp.GetLines() {
		if kept == left && (!l.GetContext() || lastMatch == nil || !bytes.Equal(l.GetPath(), lastMatch.GetPath()) ||
			l.GetLineNumber() > lastMatch.GetLineNumber()+after) {
			// The bound's last match and its context are in.
			reached = true
			break
		}
		// What the line itself may take: the room less its comma.
		room := pageRoom(doc, max, tail, cursorLen(len(l.GetPath()))) - 1
		item := grepItem(buf, l, l.GetText())
		if len(item) > room {
			if i > 0 {
				truncated = true
				break
			}
			if item = fitGrepItem(l, room); item == nil {
				return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one result does not fit in --max-response-bytes")
			}
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, item...)
		last = l
		if !l.GetContext() {
			lastMatch = l
			kept++
		}
	}
	doc.b = append(doc.b, ']')
	doc.int("files_matched", resp.GetFilesSearched()).int("matches", resp.GetMatches())
	if n := resp.GetErrors(); n > 0 {
		doc.int("unreadable", n)
	}
	// A page that ends at the bound with more to come ends the search.
	switch {
	case reached || truncated && kept == left:
		doc.bool("max_results_reached", true)
	case truncated:
		if last == nil {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "BUG(fsmcp): an empty page with more to come")
		}
		if bound != nil {
			bound.returned += kept
		}
		doc.bool("truncated", true).str("cursor", grepCursor(last.GetPath(), last.GetOffset(), bound))
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
		o.b = jsontext.AppendString(o.b, text)
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
