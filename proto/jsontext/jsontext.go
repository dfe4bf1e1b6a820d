// Package jsontext writes the JSON text of fsmcp's replies: strings
// escaped in one pass, names as text or, when not UTF-8, as base64. The
// front-end renders its replies with it; the worker renders a listing's
// entries with it, so that they cross to the front-end as one block of
// bytes, which the front-end checks (NameObjects) and places in its reply
// as they are.
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

// NameObjects reports whether objs, cut at ends, is a run of objects each
// exactly {AppendName(key, v)} for some v: one member, a JSON string of
// valid UTF-8 (escaped as AppendString escapes) or its base64 twin. Such a
// run can stand in a reply as it is, whoever rendered it.
func NameObjects(objs []byte, ends []uint32, key string) bool {
	text := []byte(`{"` + key + `":"`)
	b64 := []byte(`{"` + key + `_base64":"`)
	start := 0
	for _, e := range ends {
		end := int(e)
		if end < start || end > len(objs) {
			return false
		}
		o := objs[start:end]
		start = end
		if len(o) < 2 || !bytes.HasSuffix(o, []byte(`"}`)) {
			return false
		}
		switch {
		case bytes.HasPrefix(o, text) && len(o) >= len(text)+2:
			if !plainString(o[len(text) : len(o)-2]) {
				return false
			}
		case bytes.HasPrefix(o, b64) && len(o) >= len(b64)+2:
			if _, err := base64.StdEncoding.DecodeString(string(o[len(b64) : len(o)-2])); err != nil {
				return false
			}
		default:
			return false
		}
	}
	return start == len(objs)
}

// plainString reports whether s is the inside of a JSON string as
// AppendString writes one: valid UTF-8, no quote, backslash or control
// byte but in the escapes it writes.
func plainString(s []byte) bool {
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
		if c != '\\' || i+1 == len(s) {
			return false
		}
		switch s[i+1] {
		case '"', '\\', 'n', 'r', 't':
			i++
		case 'u':
			if i+5 >= len(s) || s[i+2] != '0' || s[i+3] != '0' || !isHex(s[i+4]) || !isHex(s[i+5]) {
				return false
			}
			i += 5
		default:
			return false
		}
	}
	return utf8.Valid(s)
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
