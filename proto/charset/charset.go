// Package charset converts text between UTF-8 and the charsets fsmcp's
// tools accept, through golang.org/x/text/encoding, for the front-end
// (which decodes what fs_read returns) and the worker (which encodes what
// fs_write and fs_replace write) alike, so both ends agree on every name
// and every byte. It is pure and trusts nothing it is given.
//
// It never substitutes: the x/text decoders turn bytes they cannot map
// into U+FFFD, and its encoders can replace what a charset cannot hold,
// so every conversion here is checked by converting back. Bytes that do
// not survive decode-then-encode unchanged, or text that does not survive
// encode-then-decode, are an *Error naming the byte offset where it
// starts.
package charset

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
)

// UTF8 is the default charset, whose text is the bytes themselves.
const UTF8 = "utf-8"

var charsets = map[string]encoding.Encoding{
	UTF8:           nil,
	"latin1":       charmap.ISO8859_1,
	"windows-1252": charmap.Windows1252,
	"shift_jis":    japanese.ShiftJIS,
	"euc-jp":       japanese.EUCJP,
	"gbk":          simplifiedchinese.GBK,
	"gb18030":      simplifiedchinese.GB18030,
	"big5":         traditionalchinese.Big5,
	"euc-kr":       korean.EUCKR,
	"utf-16le":     unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM),
	"utf-16be":     unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
}

// Names lists the charsets, sorted; the tools' schemas enumerate them.
func Names() []string {
	names := make([]string, 0, len(charsets))
	for n := range charsets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Known reports whether name is one of Names.
func Known(name string) bool {
	_, ok := charsets[name]
	return ok
}

// LineBytes reports whether a '\n' byte in the charset's text is always
// a line feed, so lines can be found in its bytes (false for UTF-16).
func LineBytes(name string) bool {
	return name != "utf-16le" && name != "utf-16be"
}

// Error is a conversion that would not be exact.
type Error struct {
	// Offset is the byte offset, in the input, where it stops being
	// exact.
	Offset int64
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func lookup(name string) (encoding.Encoding, error) {
	e, ok := charsets[name]
	if !ok {
		return nil, fmt.Errorf("unknown charset %q (known: %v)", name, Names())
	}
	return e, nil
}

// Decode returns the UTF-8 text of b, bytes in the charset name. Bytes
// that do not round-trip are an *Error at their offset.
func Decode(name string, b []byte) ([]byte, error) {
	e, err := lookup(name)
	if err != nil {
		return nil, err
	}
	if e == nil {
		if !utf8.Valid(b) {
			off := invalidUTF8(b)
			return nil, &Error{Offset: off, Msg: fmt.Sprintf("the bytes are not valid %s at byte offset %d", name, off)}
		}
		return b, nil
	}
	text, err := e.NewDecoder().Bytes(b)
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("the bytes are not %s: %v", name, err)}
	}
	back, err := encoding.ReplaceUnsupported(e.NewEncoder()).Bytes(text)
	if err != nil || !bytes.Equal(back, b) {
		off := int64(commonPrefix(back, b))
		return nil, &Error{Offset: off, Msg: fmt.Sprintf("the bytes do not round-trip through %s from byte offset %d (not %s there, or a sequence with two encodings)", name, off, name)}
	}
	return text, nil
}

// DecodePrefix is Decode of the longest prefix of b that does not end
// inside a character: a range cut at an arbitrary byte loses at most
// its last character's first bytes, which it reports as n < len(b).
func DecodePrefix(name string, b []byte) (text []byte, n int, err error) {
	text, err = Decode(name, b)
	var ce *Error
	if err == nil || !asError(err, &ce) || ce.Offset < int64(len(b))-utf8.UTFMax {
		return text, len(b), err
	}
	cut := b[:ce.Offset]
	text, err2 := Decode(name, cut)
	if err2 != nil {
		return nil, 0, err
	}
	return text, len(cut), nil
}

func asError(err error, ce **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*ce = e
	}
	return ok
}

// Encode returns text, UTF-8, in the charset name. Text the charset
// cannot hold exactly (or text that is not valid UTF-8) is an *Error at
// the offset, in text, of the first character that cannot be held.
func Encode(name string, text []byte) ([]byte, error) {
	e, err := lookup(name)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(text) {
		off := invalidUTF8(text)
		return nil, &Error{Offset: off, Msg: fmt.Sprintf("the text is not valid UTF-8 at byte offset %d", off)}
	}
	if e == nil {
		return text, nil
	}
	b, err := e.NewEncoder().Bytes(text)
	if err == nil {
		var back []byte
		if back, err = e.NewDecoder().Bytes(b); err == nil && bytes.Equal(back, text) {
			return b, nil
		}
	}
	// Find the first character that does not survive on its own.
	for i := 0; i < len(text); {
		_, size := utf8.DecodeRune(text[i:])
		r := text[i : i+size]
		rb, err := e.NewEncoder().Bytes(r)
		if err == nil {
			var back []byte
			back, err = e.NewDecoder().Bytes(rb)
			if err == nil && !bytes.Equal(back, r) {
				err = fmt.Errorf("no exact mapping")
			}
		}
		if err != nil {
			return nil, &Error{Offset: int64(i), Msg: fmt.Sprintf("%s cannot hold %q (text byte offset %d)", name, r, i)}
		}
		i += size
	}
	return nil, &Error{Msg: fmt.Sprintf("the text does not round-trip through %s", name)}
}

func invalidUTF8(b []byte) int64 {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return int64(i)
		}
		i += size
	}
	return int64(len(b))
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
