// Package jsontext writes the JSON text of fsmcp's replies: strings
// escaped in one pass, names as text or, when not UTF-8, as base64. The
// front-end renders its replies with it; the worker renders fs_glob's
// entries with it, as they stand in the reply's text, so that they cross
// to the front-end as one block of bytes, which the front-end checks
// (TextObjects) and places in the reply's text as they are.
package jsontext

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// HexDigits are the digits of a \u escape.
const HexDigits = "0123456789abcdef"

// AppendString appends s, which must be valid UTF-8, as a JSON string. It
// escapes only what JSON requires. s may be a []byte, so that file content
// is not copied into a string first.
//
// It moves eight bytes at a time: each word is stored whole, and when one
// of its bytes needs an escape, the output resumes at that byte. So a run
// between two escapes costs no call, which matters for a reply that is
// itself JSON (a quote every few bytes) as much as for text.
func AppendString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	j := len(b)
	for i := 0; i < len(s); {
		// Room for one word and the longest escape.
		if cap(b)-j < 16 {
			b = slices.Grow(b[:j], 16+(len(s)-i)+(len(s)-i)/16)
		}
		b = b[:cap(b)]
		for i+8 <= len(s) && j+16 <= len(b) {
			w := Load64(s, i)
			binary.LittleEndian.PutUint64(b[j:j+8], w)
			if m := specialBytes(w); m != 0 {
				k := bits.TrailingZeros64(m) / 8
				i, j = i+k, j+k
				break
			}
			i, j = i+8, j+8
		}
		if i == len(s) || j+16 > len(b) {
			continue
		}
		c := s[i]
		i++
		switch {
		case c >= 0x20 && c != '"' && c != '\\':
			b[j] = c
			j++
		case c == '"' || c == '\\':
			b[j], b[j+1] = '\\', c
			j += 2
		case c == '\n':
			b[j], b[j+1] = '\\', 'n'
			j += 2
		case c == '\r':
			b[j], b[j+1] = '\\', 'r'
			j += 2
		case c == '\t':
			b[j], b[j+1] = '\\', 't'
			j += 2
		default:
			b[j], b[j+1], b[j+2], b[j+3], b[j+4], b[j+5] = '\\', 'u', '0', '0', HexDigits[c>>4], HexDigits[c&0xf]
			j += 6
		}
	}
	return append(b[:j], '"')
}

// Load64 reads the eight bytes of s at i, the first the lowest.
func Load64[S string | []byte](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// PlainWord reports whether none of the eight bytes of w needs a JSON
// escape: none is below 0x20, a quote or a backslash. Each test is the
// exact "has a byte that is zero" (or "below n") trick, which borrows
// only from a byte that is itself a match, so it has no false negative
// and, when no byte matches, no false positive either.
func PlainWord(w uint64) bool { return specialBytes(w) == 0 }

// specialBytes has the high bit of each byte of w that needs a JSON
// escape set, exactly for the lowest such byte (a borrow reaches only the
// bytes above a match), so its trailing zeros find the first; it is zero
// exactly when no byte needs one.
func specialBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (w - 0x20*ones) &^ w
	q := w ^ ('"' * ones)
	bs := w ^ ('\\' * ones)
	return (below | (q-ones)&^q | (bs-ones)&^bs) & highs
}

// AppendName appends the member key with v as text when v is valid UTF-8,
// else key_base64 with v base64-encoded: a name is never hidden or
// mangled.
func AppendName(b []byte, key string, v []byte) []byte {
	if utf8.Valid(v) {
		b = AppendString(b, key)
		b = append(b, ':')
		return AppendString(b, v)
	}
	b = AppendString(b, key+"_base64")
	b = append(b, ':', '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// A reply travels as JSON-RPC, where its document is itself the JSON
// string "text": each byte of the document that JSON escapes (a quote, a
// backslash; the document holds no control byte) is escaped once more
// there. fs_glob's entries are rendered in that final form, once, by the
// worker; the front-end checks them (TextObjects) and places them in the
// reply's text as they are.

// AppendNameText appends {AppendName(key, v)} as it stands inside a JSON
// string: every quote and backslash of the object escaped once more.
func AppendNameText(b []byte, key string, v []byte) []byte {
	if !utf8.Valid(v) {
		b = append(b, `{\"`...)
		b = append(b, key...)
		b = append(b, `_base64\":\"`...)
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, `\"}`...)
	}
	b = append(b, `{\"`...)
	b = append(b, key...)
	b = append(b, `\":\"`...)
	b = appendTwice(b, v)
	return append(b, `\"}`...)
}

// appendTwice appends the inside of the JSON string AppendString writes
// of s, escaped as the inside of a JSON string once more: a run that
// needs no escape is copied word by word, as AppendString copies it.
func appendTwice(b []byte, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		start := i
		for i+8 <= len(s) && PlainWord(Load64(s, i)) {
			i += 8
		}
		for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' {
			i++
		}
		b = append(b, s[start:i]...)
		if i == len(s) {
			break
		}
		switch c := s[i]; c {
		case '"':
			b = append(b, `\\\"`...)
		case '\\':
			b = append(b, `\\\\`...)
		case '\n':
			b = append(b, `\\n`...)
		case '\r':
			b = append(b, `\\r`...)
		case '\t':
			b = append(b, `\\t`...)
		default:
			b = append(b, '\\', '\\', 'u', '0', '0', HexDigits[c>>4], HexDigits[c&0xf])
		}
	}
	return b
}

// TextObjects reports whether text, cut at ends, is a run of objects as
// AppendNameText writes them, for some values, separated by commas: the
// i-th ends at ends[i], a comma follows each but the last, and nothing
// else. Each value is a relative path: not empty, and not starting with
// a slash, so that no host path passes. It appends to sizes each object's length in the document, once
// the reply's text is decoded, and returns them. Such a run can stand in
// a reply's text as it is, whoever rendered it.
func TextObjects(text []byte, ends []uint32, key string, sizes []uint32) ([]uint32, bool) {
	// The bytes between the values are ASCII, so the values are valid
	// UTF-8 exactly when the whole run is.
	if !utf8.Valid(text) {
		return nil, false
	}
	plain := []byte(`{\"` + key + `\":\"`)
	b64 := []byte(`{\"` + key + `_base64\":\"`)
	const tail = `\"}`
	start := 0
	for i, e := range ends {
		if i > 0 {
			if start >= len(text) || text[start] != ',' {
				return nil, false
			}
			start++
		}
		end := int(e)
		if end < start || end > len(text) {
			return nil, false
		}
		o := text[start:end]
		start = end
		if !bytes.HasSuffix(o, []byte(tail)) {
			return nil, false
		}
		var n int
		switch {
		case bytes.HasPrefix(o, plain) && len(o) > len(plain)+len(tail):
			v := o[len(plain) : len(o)-len(tail)]
			escapes, ok := twiceString(v)
			if !ok || v[0] == '/' {
				return nil, false
			}
			n = len(o) - 4 - escapes
		case bytes.HasPrefix(o, b64) && len(o) > len(b64)+len(tail):
			v, err := base64.StdEncoding.DecodeString(string(o[len(b64) : len(o)-len(tail)]))
			if err != nil || len(v) == 0 || v[0] == '/' {
				return nil, false
			}
			n = len(o) - 4
		default:
			return nil, false
		}
		sizes = append(sizes, uint32(n))
	}
	return sizes, start == len(text)
}

// twiceString reports whether s is the inside of a JSON string as
// appendTwice writes one, but for its UTF-8 (TextObjects checks it), and
// how many escapes of the reply's text it holds (each one byte longer
// than the document's byte it stands for): no quote, backslash or
// control byte but in the escapes appendTwice writes.
func twiceString(s []byte) (int, bool) {
	escapes := 0
	for i := 0; i < len(s); i++ {
		for i+8 <= len(s) && PlainWord(Load64(s, i)) {
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		// Every escape starts with an escaped backslash.
		if c != '\\' || i+2 >= len(s) || s[i+1] != '\\' {
			return 0, false
		}
		switch s[i+2] {
		case 'n', 'r', 't':
			i += 2
			escapes++
		case '\\':
			if i+3 >= len(s) || (s[i+3] != '"' && s[i+3] != '\\') {
				return 0, false
			}
			i += 3
			escapes += 2
		case 'u':
			if i+6 >= len(s) || s[i+3] != '0' || s[i+4] != '0' || !isHex(s[i+5]) || !isHex(s[i+6]) {
				return 0, false
			}
			i += 6
			escapes++
		default:
			return 0, false
		}
	}
	return escapes, true
}
