package worker

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// rgjson reads the event stream of `rg --json` structurally, never by
// splitting text. It does not trust rg's output to be small: a line of a
// searched file can be any length, so the text of a line is cut at
// maxText bytes while its full length is still counted, and at most
// maxSubmatches submatches are kept. Everything else the parser keeps is
// bounded by small constants, so memory does not grow with the input.
// It does not check that the stream is a sensible sequence of events;
// the search code does that.

// eventType is the "type" of one rg --json message.
type eventType uint8

const (
	eventOther eventType = iota
	eventBegin
	eventMatch
	eventContext
	eventEnd
	eventSummary
)

var eventTypes = map[string]eventType{
	"begin": eventBegin, "match": eventMatch, "context": eventContext,
	"end": eventEnd, "summary": eventSummary,
}

// rgEvent is one decoded message. Fields absent from the message are zero.
type rgEvent struct {
	typ eventType
	// path is data.path, decoded from text or base64 bytes.
	path    []byte
	hasPath bool
	// text is the first bytes of data.lines; textLen is its full length.
	// textIsBytes reports that rg sent the line as base64 bytes (it was
	// not valid UTF-8).
	text        []byte
	textLen     int64
	textIsBytes bool
	lineNumber  int64
	offset      int64
	submatches  []submatch
	// moreSubmatches reports submatches beyond maxSubmatches.
	moreSubmatches bool
	// stats of an end or summary message.
	searches, matchedLines, matches int64
	// passedOver: the skip function passed over all but the type.
	passedOver bool
}

type submatch struct{ start, end int64 }

func (e *rgEvent) reset() {
	*e = rgEvent{path: e.path[:0], text: e.text[:0], submatches: e.submatches[:0]}
}

const (
	// maxPathBytes bounds a path in an event; no file name is longer.
	maxPathBytes = 64 << 10
	// maxKeyBytes bounds an object key we compare; longer keys are
	// unknown keys and are skipped.
	maxKeyBytes = 32
	// maxDepth bounds nesting in values we skip.
	maxDepth = 64
	// readBufBytes is the parser's read buffer.
	readBufBytes = 256 << 10
)

var errSyntax = errors.New("rg --json: malformed output")

// rgReader decodes a stream of rg --json messages from r.
type rgReader struct {
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

func newRGReader(r io.Reader, maxText, maxSubmatches int) *rgReader {
	return &rgReader{r: r, buf: make([]byte, readBufBytes), maxText: maxText, maxSubmatches: maxSubmatches}
}

// fill reads more input once the buffer is consumed. It reports whether
// there is input to read.
func (p *rgReader) fill() bool {
	if p.pos < p.end {
		return true
	}
	return p.refill()
}

func (p *rgReader) refill() bool {
	for p.err == nil {
		n, err := p.r.Read(p.buf)
		p.pos, p.end, p.err = 0, n, err
		if n > 0 {
			return true
		}
	}
	return false
}

func (p *rgReader) peek() (byte, error) {
	if !p.fill() {
		return 0, p.eofErr()
	}
	return p.buf[p.pos], nil
}

func (p *rgReader) readByte() (byte, error) {
	if !p.fill() {
		return 0, p.eofErr()
	}
	c := p.buf[p.pos]
	p.pos++
	return c, nil
}

// eofErr is the error for input that ends inside a message.
func (p *rgReader) eofErr() error {
	if p.err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return p.err
}

func (p *rgReader) skipSpace() error {
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

func (p *rgReader) expect(c byte) error {
	if err := p.skipSpace(); err != nil {
		return err
	}
	got, _ := p.readByte()
	if got != c {
		return fmt.Errorf("%w: want %q, got %q", errSyntax, c, got)
	}
	return nil
}

// next decodes the next message into ev. It returns io.EOF at the clean end
// of the stream.
//
// When skip is not nil and the message starts with its type, as rg writes
// every message but the summary, skip is asked whether the rest is needed;
// if not, the rest of the line is passed over without being decoded and ev
// holds only the type. rg writes one message a line and escapes every
// newline inside one, so the next newline ends the message.
func (p *rgReader) next(ev *rgEvent, skip func(eventType) bool) error {
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
			ev.typ = eventTypes[string(name)]
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
	if skip(ev.typ) {
		p.skipLine()
		ev.passedOver = true
		return nil
	}
	return p.members(field, true)
}

// hasPrefix reports whether the unread input starts with s.
func (p *rgReader) hasPrefix(s string) bool {
	if p.end-p.pos < len(s) && !p.refillKeep(len(s)) {
		return false
	}
	return string(p.buf[p.pos:p.pos+len(s)]) == s
}

// skipLine passes over the input up to and including the next newline.
func (p *rgReader) skipLine() {
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
func (p *rgReader) object(field func(key []byte) error) error {
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
func (p *rgReader) members(field func(key []byte) error, afterValue bool) error {
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
				return fmt.Errorf("%w: want , or } after a value, got %q", errSyntax, c)
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
func (p *rgReader) array(elem func() error) error {
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
			return fmt.Errorf("%w: want , or ] after an element, got %q", errSyntax, c)
		}
	}
}

func (p *rgReader) data(ev *rgEvent) error {
	// A repeated "data" replaces the earlier one, as in encoding/json.
	typ := ev.typ
	ev.reset()
	ev.typ = typ
	return p.object(func(key []byte) error {
		switch string(key) {
		case "path":
			var n int64
			var err error
			ev.path, n, _, ev.hasPath, err = p.textOrBytes(ev.path[:0], maxPathBytes)
			if err == nil && n > maxPathBytes {
				err = fmt.Errorf("%w: path longer than %d bytes", errSyntax, maxPathBytes)
			}
			return err
		case "lines":
			var err error
			ev.text, ev.textLen, ev.textIsBytes, _, err = p.textOrBytes(ev.text[:0], p.maxText)
			return err
		case "line_number":
			return p.intOrNull(&ev.lineNumber)
		case "absolute_offset":
			return p.intOrNull(&ev.offset)
		case "submatches":
			return p.submatches(ev)
		case "stats":
			return p.stats(ev)
		}
		return p.skip(0)
	})
}

func (p *rgReader) submatches(ev *rgEvent) error {
	ev.submatches, ev.moreSubmatches = ev.submatches[:0], false
	if c, err := p.peek(); err != nil || c == 'n' {
		return p.skip(0)
	}
	return p.array(func() error {
		var m submatch
		err := p.object(func(key []byte) error {
			switch string(key) {
			case "start":
				return p.intOrNull(&m.start)
			case "end":
				return p.intOrNull(&m.end)
			}
			return p.skip(0)
		})
		if err != nil {
			return err
		}
		if len(ev.submatches) < p.maxSubmatches {
			ev.submatches = append(ev.submatches, m)
		} else {
			ev.moreSubmatches = true
		}
		return nil
	})
}

func (p *rgReader) stats(ev *rgEvent) error {
	ev.searches, ev.matchedLines, ev.matches = 0, 0, 0
	if c, err := p.peek(); err != nil || c == 'n' {
		return p.skip(0)
	}
	return p.object(func(key []byte) error {
		switch string(key) {
		case "searches":
			return p.intOrNull(&ev.searches)
		case "matched_lines":
			return p.intOrNull(&ev.matchedLines)
		case "matches":
			return p.intOrNull(&ev.matches)
		}
		return p.skip(0)
	})
}

// textOrBytes decodes null, {"text": "..."} or {"bytes": "base64"} into dst,
// keeping at most max bytes. It returns the full decoded length, whether
// the value was bytes, and whether it was present (not null).
func (p *rgReader) textOrBytes(dst []byte, max int) (out []byte, n int64, isBytes, present bool, err error) {
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
func (p *rgReader) base64(dst []byte, max int) ([]byte, int64, error) {
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
		return dst, 0, fmt.Errorf("%w: base64 length %d", errSyntax, n)
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
		return dst, 0, fmt.Errorf("%w: %v", errSyntax, err)
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
func (p *rgReader) smallString() ([]byte, error) {
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
func (p *rgReader) str(dst []byte, max int) ([]byte, int64, error) {
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
			return dst, n, fmt.Errorf("%w: control character in a string", errSyntax)
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
			return dst, n, fmt.Errorf("%w: bad escape %q", errSyntax, e)
		}
		dst = p.add(dst, max, &n, rb[:1])
	}
}

// add appends b to dst while dst holds fewer than max bytes, counts b in
// *n, and remembers the last two bytes decoded.
func (p *rgReader) add(dst []byte, max int, n *int64, b []byte) []byte {
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
func (p *rgReader) lowSurrogate(hi rune) rune {
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
func (p *rgReader) refillKeep(n int) bool {
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

func (p *rgReader) hex4() (rune, error) {
	if p.end-p.pos < 4 && !p.refillKeep(4) {
		return 0, io.ErrUnexpectedEOF
	}
	r, ok := parseHex4(p.buf[p.pos : p.pos+4])
	if !ok {
		return 0, fmt.Errorf("%w: bad \\u escape", errSyntax)
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
func (p *rgReader) intOrNull(v *int64) error {
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
			return fmt.Errorf("%w: integer out of range", errSyntax)
		}
		x = x*10 + int64(c-'0')
		digits++
		p.pos++
	}
	if digits == 0 || digits > 1 && c == '0' {
		return fmt.Errorf("%w: want a non-negative integer", errSyntax)
	}
	if c, err := p.peek(); err == nil && (c == '.' || c == 'e' || c == 'E') {
		return fmt.Errorf("%w: want an integer", errSyntax)
	}
	*v = x
	return nil
}

func (p *rgReader) literal(word string) error {
	for i := 0; i < len(word); i++ {
		c, err := p.readByte()
		if err != nil {
			return err
		}
		if c != word[i] {
			return fmt.Errorf("%w: bad literal", errSyntax)
		}
	}
	return nil
}

// skip consumes one value of any type, keeping nothing of it.
func (p *rgReader) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested too deeply", errSyntax)
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
	return fmt.Errorf("%w: unexpected %q", errSyntax, c)
}

// number consumes a JSON number, checking its grammar.
func (p *rgReader) number() error {
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
		return fmt.Errorf("%w: bad number", errSyntax)
	}
	if c, err := p.peek(); err == nil && c == '.' {
		p.pos++
		if digits() == 0 {
			return fmt.Errorf("%w: bad number", errSyntax)
		}
	}
	if c, err := p.peek(); err == nil && (c == 'e' || c == 'E') {
		p.pos++
		if c, err := p.peek(); err == nil && (c == '+' || c == '-') {
			p.pos++
		}
		if digits() == 0 {
			return fmt.Errorf("%w: bad number", errSyntax)
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
