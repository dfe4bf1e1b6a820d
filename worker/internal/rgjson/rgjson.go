// Package rgjson reads the event stream of `rg --json` structurally, never by
// splitting text. It does not trust rg's output to be small: a line of a
// searched file can be any length, so the text of a line is cut at
// maxText bytes while its full length is still counted, and at most
// maxSubmatches submatches are kept. Everything else the parser keeps is
// bounded by small constants, so memory does not grow with the input.
// It does not check that the stream is a sensible sequence of events;
// the search code does that.
package rgjson

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// Type is the "type" of one rg --json message.
type Type uint8

// The message types the search code tells apart; Other is any other.
const (
	Other Type = iota
	Begin
	Match
	Context
	End
	Summary
)

var eventTypes = map[string]Type{
	"begin": Begin, "match": Match, "context": Context,
	"end": End, "summary": Summary,
}

// Event is one decoded message. Fields absent from the message are zero.
type Event struct {
	Type Type
	// Path is data.path, decoded from text or base64 bytes.
	Path    []byte
	HasPath bool
	// Text is the first bytes of data.lines; TextLen is its full length.
	// TextIsBytes reports that rg sent the line as base64 bytes (it was
	// not valid UTF-8).
	Text        []byte
	TextLen     int64
	TextIsBytes bool
	LineNumber  int64
	Offset      int64
	Submatches  []Submatch
	// MoreSubmatches reports submatches beyond maxSubmatches.
	MoreSubmatches bool
	// Stats of an end or summary message.
	Searches, MatchedLines, Matches int64
	// PassedOver: the skip function passed over all but the type.
	PassedOver bool
}

// Submatch is where one match lies in Text, in bytes.
type Submatch struct{ Start, End int64 }

func (e *Event) reset() {
	*e = Event{Path: e.Path[:0], Text: e.Text[:0], Submatches: e.Submatches[:0]}
}

const (
	// MaxPathBytes bounds a path in an event; no file name is longer.
	MaxPathBytes = 64 << 10
	// maxKeyBytes bounds an object key we compare; longer keys are
	// unknown keys and are skipped.
	maxKeyBytes = 32
	// maxDepth bounds nesting in values we skip.
	maxDepth = 64
	// readBufBytes is the parser's read buffer.
	readBufBytes = 256 << 10
)

// ErrSyntax is the error for output that is not rg's JSON.
var ErrSyntax = errors.New("rg --json: malformed output")

// Reader decodes a stream of rg --json messages from r.
type Reader struct {
	r             io.Reader
	buf           []byte
	pos, end      int
	err           error
	maxText       int
	maxSubmatches int
	key           []byte
	scratch       []byte
	// tail holds the last two bytes str decoded.
	tail [2]byte
}

// NewReader reads messages from r, keeping at most maxText bytes of a
// line's text and maxSubmatches submatches of a line.
func NewReader(r io.Reader, maxText, maxSubmatches int) *Reader {
	return &Reader{r: r, buf: make([]byte, readBufBytes), maxText: maxText, maxSubmatches: maxSubmatches}
}

// fill reads more input once the buffer is consumed. It reports whether
// there is input to read.
func (p *Reader) fill() bool {
	if p.pos < p.end {
		return true
	}
	return p.refill()
}

func (p *Reader) refill() bool {
	for p.err == nil {
		n, err := p.r.Read(p.buf)
		p.pos, p.end, p.err = 0, n, err
		if n > 0 {
			return true
		}
	}
	return false
}

func (p *Reader) peek() (byte, error) {
	if !p.fill() {
		return 0, p.eofErr()
	}
	return p.buf[p.pos], nil
}

func (p *Reader) readByte() (byte, error) {
	if !p.fill() {
		return 0, p.eofErr()
	}
	c := p.buf[p.pos]
	p.pos++
	return c, nil
}

// eofErr is the error for input that ends inside a message.
func (p *Reader) eofErr() error {
	if p.err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return p.err
}

func (p *Reader) skipSpace() error {
	if p.pos < p.end && p.buf[p.pos] > ' ' {
		return nil // rg writes no whitespace between tokens
	}
	for {
		if !p.fill() {
			return p.eofErr()
		}
		for p.pos < p.end {
			switch p.buf[p.pos] {
			case ' ', '\t', '\r', '\n':
				p.pos++
			default:
				return nil
			}
		}
	}
}

func (p *Reader) expect(c byte) error {
	if err := p.skipSpace(); err != nil {
		return err
	}
	got, _ := p.readByte()
	if got != c {
		return fmt.Errorf("%w: want %q, got %q", ErrSyntax, c, got)
	}
	return nil
}

// Next decodes the next message into ev. It returns io.EOF at the clean end
// of the stream.
//
// When skip is not nil and the message starts with its type, as rg writes
// every message but the summary, skip is asked whether the rest is needed;
// if not, the rest of the line is passed over without being decoded and ev
// holds only the type. rg writes one message a line and escapes every
// newline inside one, so the next newline ends the message.
func (p *Reader) Next(ev *Event, skip func(Type) bool) error {
	ev.reset()
	if err := p.skipSpace(); err != nil {
		if err == io.ErrUnexpectedEOF {
			return io.EOF
		}
		return err
	}
	field := func(key []byte) error {
		switch string(key) {
		case "type":
			name, err := p.smallString()
			if err != nil {
				return err
			}
			ev.Type = eventTypes[string(name)]
			return nil
		case "data":
			return p.data(ev)
		}
		return p.skip(0)
	}
	const typeKey = `{"type":`
	if skip == nil || !p.hasPrefix(typeKey) {
		return p.object(field)
	}
	p.pos += len(typeKey)
	if err := field([]byte("type")); err != nil {
		return err
	}
	if skip(ev.Type) {
		p.skipLine()
		ev.PassedOver = true
		return nil
	}
	return p.members(field, true)
}

// hasPrefix reports whether the unread input starts with s.
func (p *Reader) hasPrefix(s string) bool {
	if p.end-p.pos < len(s) && !p.refillKeep(len(s)) {
		return false
	}
	return string(p.buf[p.pos:p.pos+len(s)]) == s
}

// skipLine passes over the input up to and including the next newline.
func (p *Reader) skipLine() {
	for p.fill() {
		if i := bytes.IndexByte(p.buf[p.pos:p.end], '\n'); i >= 0 {
			p.pos += i + 1
			return
		}
		p.pos = p.end
	}
}

// object decodes an object, calling field for each key with the reader
// positioned at the value; field must consume the value.
func (p *Reader) object(field func(key []byte) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if err := p.skipSpace(); err != nil {
		return err
	}
	if c, _ := p.peek(); c == '}' {
		p.pos++
		return nil
	}
	return p.members(field, false)
}

// members decodes an object's members up to its closing brace: from a key
// on, or, when afterValue is set, from just after a member's value.
func (p *Reader) members(field func(key []byte) error, afterValue bool) error {
	for {
		if afterValue {
			if err := p.skipSpace(); err != nil {
				return err
			}
			c, _ := p.readByte()
			switch c {
			case ',':
			case '}':
				return nil
			default:
				return fmt.Errorf("%w: want , or } after a value, got %q", ErrSyntax, c)
			}
		}
		afterValue = true
		if err := p.expect('"'); err != nil {
			return err
		}
		key, n, err := p.str(p.key[:0], maxKeyBytes+1)
		if err != nil {
			return err
		}
		p.key = key
		if n > maxKeyBytes {
			key = nil // too long to be a key we know
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := p.skipSpace(); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
	}
}

// array decodes an array, calling elem at each element.
func (p *Reader) array(elem func() error) error {
	if err := p.expect('['); err != nil {
		return err
	}
	if err := p.skipSpace(); err != nil {
		return err
	}
	if c, _ := p.peek(); c == ']' {
		p.pos++
		return nil
	}
	for {
		if err := p.skipSpace(); err != nil {
			return err
		}
		if err := elem(); err != nil {
			return err
		}
		if err := p.skipSpace(); err != nil {
			return err
		}
		c, _ := p.readByte()
		switch c {
		case ',':
		case ']':
			return nil
		default:
			return fmt.Errorf("%w: want , or ] after an element, got %q", ErrSyntax, c)
		}
	}
}

func (p *Reader) data(ev *Event) error {
	// A repeated "data" replaces the earlier one, as in encoding/json.
	typ := ev.Type
	ev.reset()
	ev.Type = typ
	return p.object(func(key []byte) error {
		switch string(key) {
		case "path":
			var n int64
			var err error
			ev.Path, n, _, ev.HasPath, err = p.textOrBytes(ev.Path[:0], MaxPathBytes)
			if err == nil && n > MaxPathBytes {
				err = fmt.Errorf("%w: path longer than %d bytes", ErrSyntax, MaxPathBytes)
			}
			return err
		case "lines":
			var err error
			ev.Text, ev.TextLen, ev.TextIsBytes, _, err = p.textOrBytes(ev.Text[:0], p.maxText)
			return err
		case "line_number":
			return p.intOrNull(&ev.LineNumber)
		case "absolute_offset":
			return p.intOrNull(&ev.Offset)
		case "submatches":
			return p.submatches(ev)
		case "stats":
			return p.stats(ev)
		}
		return p.skip(0)
	})
}

func (p *Reader) submatches(ev *Event) error {
	ev.Submatches, ev.MoreSubmatches = ev.Submatches[:0], false
	if c, err := p.peek(); err != nil || c == 'n' {
		return p.skip(0)
	}
	return p.array(func() error {
		var m Submatch
		err := p.object(func(key []byte) error {
			switch string(key) {
			case "start":
				return p.intOrNull(&m.Start)
			case "end":
				return p.intOrNull(&m.End)
			}
			return p.skip(0)
		})
		if err != nil {
			return err
		}
		if len(ev.Submatches) < p.maxSubmatches {
			ev.Submatches = append(ev.Submatches, m)
		} else {
			ev.MoreSubmatches = true
		}
		return nil
	})
}

func (p *Reader) stats(ev *Event) error {
	ev.Searches, ev.MatchedLines, ev.Matches = 0, 0, 0
	if c, err := p.peek(); err != nil || c == 'n' {
		return p.skip(0)
	}
	return p.object(func(key []byte) error {
		switch string(key) {
		case "searches":
			return p.intOrNull(&ev.Searches)
		case "matched_lines":
			return p.intOrNull(&ev.MatchedLines)
		case "matches":
			return p.intOrNull(&ev.Matches)
		}
		return p.skip(0)
	})
}

// textOrBytes decodes null, {"text": "..."} or {"bytes": "base64"} into dst,
// keeping at most max bytes. It returns the full decoded length, whether
// the value was bytes, and whether it was present (not null).
func (p *Reader) textOrBytes(dst []byte, max int) (out []byte, n int64, isBytes, present bool, err error) {
	out = dst
	if c, err := p.peek(); err != nil || c == 'n' {
		return out, 0, false, false, p.skip(0)
	}
	err = p.object(func(key []byte) error {
		switch string(key) {
		case "text":
			if err := p.expect('"'); err != nil {
				return err
			}
			var err error
			out, n, err = p.str(dst[:0], max)
			if err == nil && n > int64(len(out)) {
				out = trimPartialRune(out)
			}
			isBytes, present = false, true
			return err
		case "bytes":
			var err error
			out, n, err = p.base64(dst[:0], max)
			isBytes, present = true, true
			return err
		}
		return p.skip(0)
	})
	return out, n, isBytes, present, err
}

// base64 decodes a JSON string holding standard base64, keeping at most
// max decoded bytes and returning the full decoded length.
func (p *Reader) base64(dst []byte, max int) ([]byte, int64, error) {
	if err := p.expect('"'); err != nil {
		return dst, 0, err
	}
	// Keep whole 4-character groups only.
	keep := (max + 2) / 3 * 4
	enc, n, err := p.str(p.scratch[:0], keep)
	p.scratch = enc[:0]
	if err != nil {
		return dst, 0, err
	}
	if n%4 != 0 {
		return dst, 0, fmt.Errorf("%w: base64 length %d", ErrSyntax, n)
	}
	cut := n > int64(len(enc))
	full := n / 4 * 3
	if p.tail[1] == '=' {
		full--
		if p.tail[0] == '=' {
			full--
		}
	}
	if cut {
		enc = enc[:len(enc)/4*4]
	}
	out, err := base64.StdEncoding.AppendDecode(dst, enc)
	if err != nil {
		return dst, 0, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if !cut {
		full = int64(len(out) - len(dst))
	}
	if len(out)-len(dst) > max {
		out = out[:len(dst)+max]
	}
	return out, full, nil
}

// smallString decodes a string value of at most maxKeyBytes bytes; a longer
// one decodes to nil.
func (p *Reader) smallString() ([]byte, error) {
	if c, err := p.peek(); err != nil || c != '"' {
		return nil, p.skip(0)
	}
	p.pos++
	s, n, err := p.str(p.scratch[:0], maxKeyBytes+1)
	p.scratch = s[:0]
	if n > maxKeyBytes {
		return nil, err
	}
	return s, err
}

// str decodes the rest of a JSON string (after its opening quote) onto
// dst, appending at most max bytes, and returns the full decoded length.
// Like encoding/json, it decodes an unpaired surrogate escape as U+FFFD.
// Bytes that are not valid UTF-8 are kept as they are.
func (p *Reader) str(dst []byte, max int) ([]byte, int64, error) {
	var n int64
	p.tail = [2]byte{}
	var rb [utf8.UTFMax]byte
	for {
		if !p.fill() {
			return dst, n, p.eofErr()
		}
		// Fast path: take the run up to the next quote, backslash or
		// control character.
		start := p.pos
		i := start
		buf := p.buf[:p.end]
		for i < len(buf) {
			c := buf[i]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			i++
		}
		if i > start {
			dst = p.add(dst, max, &n, buf[start:i])
		}
		p.pos = i
		if i == p.end {
			continue
		}
		c := p.buf[i]
		p.pos++
		switch {
		case c == '"':
			return dst, n, nil
		case c < 0x20:
			return dst, n, fmt.Errorf("%w: control character in a string", ErrSyntax)
		}
		e, err := p.readByte()
		if err != nil {
			return dst, n, err
		}
		switch e {
		case '"', '\\', '/':
			rb[0] = e
		case 'b':
			rb[0] = '\b'
		case 'f':
			rb[0] = '\f'
		case 'n':
			rb[0] = '\n'
		case 'r':
			rb[0] = '\r'
		case 't':
			rb[0] = '\t'
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return dst, n, err
			}
			if utf16.IsSurrogate(r) {
				r = p.lowSurrogate(r)
			}
			dst = p.add(dst, max, &n, rb[:utf8.EncodeRune(rb[:], r)])
			continue
		default:
			return dst, n, fmt.Errorf("%w: bad escape %q", ErrSyntax, e)
		}
		dst = p.add(dst, max, &n, rb[:1])
	}
}

// add appends b to dst while dst holds fewer than max bytes, counts b in
// *n, and remembers the last two bytes decoded.
func (p *Reader) add(dst []byte, max int, n *int64, b []byte) []byte {
	if room := max - len(dst); room > 0 {
		dst = append(dst, b[:min(room, len(b))]...)
	}
	*n += int64(len(b))
	if len(b) >= 2 {
		p.tail = [2]byte{b[len(b)-2], b[len(b)-1]}
	} else {
		p.tail = [2]byte{p.tail[1], b[0]}
	}
	return dst
}

// lowSurrogate completes the high surrogate hi with a following \uXXXX low
// surrogate, consuming it only if it is one; otherwise hi decodes to
// U+FFFD, as encoding/json does.
func (p *Reader) lowSurrogate(hi rune) rune {
	if hi >= 0xdc00 || p.end-p.pos < 6 && !p.refillKeep(6) {
		return utf8.RuneError
	}
	b := p.buf[p.pos:]
	if b[0] != '\\' || b[1] != 'u' {
		return utf8.RuneError
	}
	lo, ok := parseHex4(b[2:6])
	if !ok {
		return utf8.RuneError
	}
	r := utf16.DecodeRune(hi, lo)
	if r == utf8.RuneError {
		return r
	}
	p.pos += 6
	return r
}

// refillKeep makes at least n unread bytes available in the buffer, if
// the input has them, by moving the unread bytes to the front.
func (p *Reader) refillKeep(n int) bool {
	copy(p.buf, p.buf[p.pos:p.end])
	p.end -= p.pos
	p.pos = 0
	for p.end < n && p.err == nil {
		m, err := p.r.Read(p.buf[p.end:])
		p.end += m
		p.err = err
	}
	return p.end >= n
}

func (p *Reader) hex4() (rune, error) {
	if p.end-p.pos < 4 && !p.refillKeep(4) {
		return 0, io.ErrUnexpectedEOF
	}
	r, ok := parseHex4(p.buf[p.pos : p.pos+4])
	if !ok {
		return 0, fmt.Errorf("%w: bad \\u escape", ErrSyntax)
	}
	p.pos += 4
	return r, nil
}

func parseHex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// intOrNull decodes a non-negative integer, or null (leaving v alone).
func (p *Reader) intOrNull(v *int64) error {
	c, err := p.peek()
	if err != nil {
		return err
	}
	if c == 'n' {
		return p.literal("null")
	}
	var x int64
	digits := 0
	for {
		if !p.fill() {
			break
		}
		c := p.buf[p.pos]
		if c < '0' || c > '9' {
			break
		}
		if x > (1<<63-1-9)/10 {
			return fmt.Errorf("%w: integer out of range", ErrSyntax)
		}
		x = x*10 + int64(c-'0')
		digits++
		p.pos++
	}
	if digits == 0 || digits > 1 && c == '0' {
		return fmt.Errorf("%w: want a non-negative integer", ErrSyntax)
	}
	if c, err := p.peek(); err == nil && (c == '.' || c == 'e' || c == 'E') {
		return fmt.Errorf("%w: want an integer", ErrSyntax)
	}
	*v = x
	return nil
}

func (p *Reader) literal(word string) error {
	for i := 0; i < len(word); i++ {
		c, err := p.readByte()
		if err != nil {
			return err
		}
		if c != word[i] {
			return fmt.Errorf("%w: bad literal", ErrSyntax)
		}
	}
	return nil
}

// skip consumes one value of any type, keeping nothing of it.
func (p *Reader) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested too deeply", ErrSyntax)
	}
	c, err := p.peek()
	if err != nil {
		return err
	}
	switch {
	case c == '{':
		return p.object(func([]byte) error { return p.skip(depth + 1) })
	case c == '[':
		return p.array(func() error { return p.skip(depth + 1) })
	case c == '"':
		p.pos++
		_, _, err := p.str(nil, 0)
		return err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return fmt.Errorf("%w: unexpected %q", ErrSyntax, c)
}

// number consumes a JSON number, checking its grammar.
func (p *Reader) number() error {
	c, _ := p.peek()
	if c == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.fill() {
			c := p.buf[p.pos]
			if c < '0' || c > '9' {
				break
			}
			p.pos++
			n++
		}
		return n
	}
	first, _ := p.peek()
	n := digits()
	if n == 0 || n > 1 && first == '0' {
		return fmt.Errorf("%w: bad number", ErrSyntax)
	}
	if c, err := p.peek(); err == nil && c == '.' {
		p.pos++
		if digits() == 0 {
			return fmt.Errorf("%w: bad number", ErrSyntax)
		}
	}
	if c, err := p.peek(); err == nil && (c == 'e' || c == 'E') {
		p.pos++
		if c, err := p.peek(); err == nil && (c == '+' || c == '-') {
			p.pos++
		}
		if digits() == 0 {
			return fmt.Errorf("%w: bad number", ErrSyntax)
		}
	}
	return nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, so
// that a cut line of text stays text.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
