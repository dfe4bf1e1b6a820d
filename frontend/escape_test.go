package frontend

import (
	"bytes"
	"testing"
)

// appendStringReference is appendString byte by byte, the definition the
// word-at-a-time scan must match.
func appendStringReference(b, s []byte) []byte {
	b = append(b, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// FuzzAppendString checks appendString, on bytes and on strings, against
// the byte-by-byte definition, at every alignment of the special bytes.
func FuzzAppendString(f *testing.F) {
	for _, seed := range []string{"", "abcdefgh", "abcdefg\"", "\\bcdefghijklmnop", "héllo wörld\n\t\r\x00\x1f\x7f",
		"0123456789abcdef\x01", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\"", "the quick brown fox jumps over the lazy dog\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want := appendStringReference([]byte("x"), s)
		if got := appendString([]byte("x"), s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %q, want %q", s, got, want)
		}
		if got := appendString([]byte("x"), string(s)); !bytes.Equal(got, want) {
			t.Fatalf("appendString(string %q) = %q, want %q", s, got, want)
		}
	})
}

// TestPlainWordEveryByte: a word is plain exactly when each of its bytes
// needs no escape, for every byte value at every position.
func TestPlainWordEveryByte(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := uint64(0x6161616161616161) // "aaaaaaaa"
			w = w&^(0xff<<(8*pos)) | uint64(c)<<(8*pos)
			want := c >= 0x20 && c != '"' && c != '\\'
			if got := plainWord(w); got != want {
				t.Fatalf("plainWord with byte %#x at %d = %v, want %v", c, pos, got, want)
			}
		}
	}
}
