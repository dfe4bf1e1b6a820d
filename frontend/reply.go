package frontend

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolError is a failed call as the client sees it.
type toolError struct {
	code          fsmcpv1.ErrorCode
	message       string
	path          []byte
	hasPath       bool
	currentSHA256 string
	count         int64
	nearest       *fsmcpv1.Nearest
	// missingDirectory is, on not_found, the directory a new name needs
	// (fs_mkdir creates it).
	missingDirectory []byte
	// policyViolation marks a refusal by the operator's policy or rules.
	policyViolation bool
	// conflicts, for a refused rewind, is the JSON array of its
	// conflicts.
	conflicts []byte
	// offset is, on invalid_argument about text in a charset, the byte
	// offset where it stops holding.
	offset *int64
}

func (e *toolError) Error() string { return codeName(e.code) + ": " + e.message }

func errf(code fsmcpv1.ErrorCode, format string, args ...any) *toolError {
	return &toolError{code: code, message: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) *toolError {
	return errf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, format, args...)
}

// codeName derives the JSON code from the proto enum name, so the two can
// never disagree: ERROR_CODE_NOT_FOUND is "not_found".
func codeName(c fsmcpv1.ErrorCode) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "ERROR_CODE_"))
}

// obj writes one JSON object with its keys in the order written. Strings it
// is given are valid UTF-8; byte strings go through name, which picks
// between key and key_base64.
type obj struct {
	b []byte
	n int
	// media, when set, is a content block the result carries after the
	// document (fs_view's picture or sound).
	media mcp.Content
	// meta, when set, is the result's _meta: a success that carries a
	// refusal inside it (one entry of fs_read_many) marks it as errorResult
	// marks a failure.
	meta mcp.Meta
	// run, when set, is a part of the document held as it stands in the
	// reply's text, the JSON string that carries the document (fs_glob's
	// entries as the worker rendered them, checked): it sits at runAt in
	// b and is runSize bytes of the document.
	run     []byte
	runAt   int
	runSize int
}

func newObj() *obj { return &obj{b: append(make([]byte, 0, 256), '{')} }

func (o *obj) key(k string) {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = jsontext.AppendString(o.b, k)
	o.b = append(o.b, ':')
}

func (o *obj) str(k, v string) *obj { o.key(k); o.b = jsontext.AppendString(o.b, v); return o }
func (o *obj) int(k string, v int64) *obj {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
	return o
}
func (o *obj) bool(k string, v bool) *obj { o.key(k); o.b = strconv.AppendBool(o.b, v); return o }

// name writes k with v as text when v is valid UTF-8, else k_base64 with v
// base64-encoded (jsontext.AppendName).
func (o *obj) name(k string, v []byte) *obj {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = jsontext.AppendName(o.b, k, v)
	return o
}

// object writes k with a nested object.
func (o *obj) object(k string, inner *obj) *obj {
	o.key(k)
	o.b = append(o.b, inner.bytes()...)
	return o
}

// rawValue writes k with already-encoded JSON.
func (o *obj) rawValue(k string, v []byte) *obj {
	o.key(k)
	o.b = append(o.b, v...)
	return o
}

func (o *obj) bytes() []byte { return append(o.b[:len(o.b):len(o.b)], '}') }

// text closes the document and returns it; o is not used afterwards. The
// string is the document's own bytes, as strings.Builder hands over its
// buffer: a page is up to --max-response-bytes, and string(o.b) would copy
// it once more.
func (o *obj) text() string {
	o.b = append(o.b, '}')
	b := o.b
	o.b = nil // nothing writes to b again
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// size is the length of the document if it were closed now.
func (o *obj) size() int { return len(o.b) + o.runSize + 1 }

// escapedLen is the length appendString adds for the byte c, beyond quotes.
func escapedLen(c byte) int { return int(escapedLens[c]) }

// escapedLens is escapedLen as a table: fitting a page's content looks up
// every byte.
var escapedLens = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 2
		case c < 0x20:
			t[c] = 6
		default:
			t[c] = 1
		}
	}
	return t
}()

func formatTime(ns int64) string { return string(appendTime(nil, ns)) }

// timeLayout is every reply's time: RFC 3339, UTC, nanoseconds.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// appendTime appends the time ns (Unix nanoseconds) to b in timeLayout.
// It writes the digits itself, since AppendFormat interprets the layout
// each time and a listing writes thousands; a year outside 0–9999, which
// the layout writes otherwise, goes to AppendFormat.
func appendTime(b []byte, ns int64) []byte {
	t := time.Unix(0, ns).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, timeLayout)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond(), 9)
	return append(b, 'Z')
}

// appendDigits appends the n low decimal digits of v ≥ 0, zero-padded.
func appendDigits(b []byte, v, n int) []byte {
	b = append(b, "000000000"[:n]...)
	for i := len(b) - 1; i >= len(b)-n; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// formatMode is the permission bits of m as four octal digits ("0644"),
// written without fmt: every stat and listed entry has one.
func formatMode(m uint32) string {
	return string([]byte{'0' + byte(m>>9&7), '0' + byte(m>>6&7), '0' + byte(m>>3&7), '0' + byte(m&7)})
}

// typeName is the name replies give the file type t ("file",
// "directory", ...).
func typeName(t fsmcpv1.FileType) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return enumTypeName(t)
}

func enumTypeName(t fsmcpv1.FileType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "FILE_TYPE_"))
}

// typeNames holds typeName of every type the enum declares, made once:
// a listing names thousands (appendEntry reads it too).
var typeNames = func() map[fsmcpv1.FileType]string {
	m := make(map[fsmcpv1.FileType]string, len(fsmcpv1.FileType_name))
	for v := range fsmcpv1.FileType_name {
		m[fsmcpv1.FileType(v)] = enumTypeName(fsmcpv1.FileType(v))
	}
	return m
}()

// okResult wraps a success document: {"ok":true, ...}.
func okResult(doc *obj) *mcp.CallToolResult {
	var text mcp.Content
	if doc.run != nil {
		size := doc.size()
		doc.b = append(doc.b, '}')
		text = &splicedText{TextContent: &mcp.TextContent{}, head: doc.b[:doc.runAt], run: doc.run, tail: doc.b[doc.runAt:], size: size}
		doc.b = nil
	} else {
		text = &mcp.TextContent{Text: doc.text()}
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{text}}
	if doc.media != nil {
		res.Content = append(res.Content, doc.media)
	}
	res.Meta = doc.meta
	return res
}

// splicedText is the text block of a document that holds a run as it
// stands in the reply's text (obj.run): encoding it escapes the document
// around the run and places the run as it is. Its TextContent's Text is
// unset; what needs the document as a string decodes it (document).
type splicedText struct {
	*mcp.TextContent
	// head, run, tail: the document is head, run decoded, then tail.
	head, run, tail []byte
	// size is the document's length.
	size int
}

// appendText appends the document as a JSON string: the reply's text.
func (t *splicedText) appendText(b []byte) []byte {
	b = jsontext.AppendString(b, t.head)
	b = append(b[:len(b)-1], t.run...)
	n := len(b)
	b = jsontext.AppendString(b, t.tail)
	return append(b[:n], b[n+1:]...)
}

// MarshalJSON encodes the block as go-sdk encodes a text block without
// annotations.
func (t *splicedText) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(t.head)+len(t.run)+len(t.tail)+len(t.tail)/8+64)
	b = append(b, `{"type":"text","text":`...)
	return append(t.appendText(b), '}'), nil
}

// document is the document as a string.
func (t *splicedText) document() string {
	b := make([]byte, 0, t.size)
	b = append(b, t.head...)
	for i := 0; i < len(t.run); i++ {
		// A checked run escapes only quotes and backslashes: each
		// backslash stands before the byte it escapes.
		if t.run[i] == '\\' {
			i++
		}
		b = append(b, t.run[i])
	}
	b = append(b, t.tail...)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// errorResult renders a failure as the contract's error document with
// isError set; outside_root also sets _meta.scope_violation, and a
// refusal by the --protect/--deny policy or the --rules
// _meta.policy_violation.
func errorResult(e *toolError) *mcp.CallToolResult {
	doc := newObj().bool("ok", false).object("error", errorDoc(e))
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: doc.text()}}}
	res.Meta = violationMeta(res.Meta, e)
	return res
}

// violationMeta adds to m what a relay's audit reads of refusal e:
// scope_violation for outside_root, policy_violation for the policy.
func violationMeta(m mcp.Meta, e *toolError) mcp.Meta {
	var key string
	switch {
	case e.code == fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT:
		key = "scope_violation"
	case e.policyViolation:
		key = "policy_violation"
	default:
		return m
	}
	if m == nil {
		m = mcp.Meta{}
	}
	m[key] = true
	return m
}

// errorDoc is the contract's error object: code, message and what else
// the failure names.
func errorDoc(e *toolError) *obj {
	inner := newObj().str("code", codeName(e.code)).str("message", e.message)
	if e.hasPath {
		inner.name("path", e.path)
	}
	if e.currentSHA256 != "" {
		inner.str("current_sha256", e.currentSHA256)
	}
	if e.count != 0 {
		inner.int("count", e.count)
	}
	if n := e.nearest; n != nil {
		near := newObj().int("line_number", n.GetLineNumber()).int("offset", n.GetOffset()).str("differs", n.GetDiffers())
		if n.GetMatchedBytes() > 0 {
			near.int("matched_bytes", n.GetMatchedBytes())
		}
		inner.object("nearest", near)
	}
	if len(e.missingDirectory) > 0 {
		inner.name("missing_directory", e.missingDirectory)
	}
	if e.conflicts != nil {
		inner.rawValue("conflicts", e.conflicts)
	}
	if e.offset != nil {
		inner.int("offset", *e.offset)
	}
	return inner
}
