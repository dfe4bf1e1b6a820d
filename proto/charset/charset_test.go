package charset

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"
)

// Samples holds, per charset, text it can hold beyond ASCII and that
// text's bytes in it (written out, not computed by the code under test);
// Unrepresentable a character it cannot hold, NotRoundTrip bytes in it
// that do not survive decoding and encoding again.
var samples = []struct {
	name, text      string
	bytes           []byte
	unrepresentable string
	notRoundTrip    []byte
}{
	{"latin1", "café ñ", []byte("caf\xe9 \xf1"), "€", nil},
	{"windows-1252", "€ café", []byte("\x80 caf\xe9"), "ā", []byte("\x81")},
	{"shift_jis", "日本", []byte("\x93\xfa\x96\x7b"), "한", []byte("\x93 ")},
	{"euc-jp", "日本", []byte("\xc6\xfc\xcb\xdc"), "한", []byte("\xc6 ")},
	{"gbk", "中文", []byte("\xd6\xd0\xce\xc4"), "한", []byte("\xd6 ")},
	{"gb18030", "中文", []byte("\xd6\xd0\xce\xc4"), "", []byte("\xd6 ")},
	{"big5", "中文", []byte("\xa4\xa4\xa4\xe5"), "한", []byte("\xa4 ")},
	{"euc-kr", "한국", []byte("\xc7\xd1\xb1\xb9"), "😀", []byte("\xc7 ")},
	{"utf-16le", "hé", []byte("h\x00\xe9\x00"), "", []byte("h\x00\x00\xd8")},
	{"utf-16be", "hé", []byte("\x00h\x00\xe9"), "", []byte("\x00h\xd8\x00")},
	{"utf-8", "hé", []byte("h\xc3\xa9"), "", []byte("h\xe9")},
}

func TestRoundTrip(t *testing.T) {
	if len(samples) != len(Names()) {
		t.Fatalf("%d samples for %d charsets", len(samples), len(Names()))
	}
	for _, s := range samples {
		if !Known(s.name) {
			t.Fatalf("%s is not known", s.name)
		}
		b, err := Encode(s.name, []byte(s.text))
		if err != nil || !bytes.Equal(b, s.bytes) {
			t.Errorf("Encode(%s, %q) = %q, %v, want %q", s.name, s.text, b, err, s.bytes)
		}
		if s.name != UTF8 && utf8.Valid(s.bytes) {
			t.Errorf("%s: sample bytes %q are valid UTF-8; want bytes that are not", s.name, s.bytes)
		}
		text, err := Decode(s.name, s.bytes)
		if err != nil || string(text) != s.text {
			t.Errorf("Decode(%s, %q) = %q, %v, want %q", s.name, s.bytes, text, err, s.text)
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, s := range samples {
		var ce *Error
		if s.unrepresentable != "" {
			in := []byte("ok " + s.unrepresentable)
			_, err := Encode(s.name, in)
			if !errors.As(err, &ce) || ce.Offset != 3 {
				t.Errorf("Encode(%s, %q) = %v, want an error at offset 3", s.name, in, err)
			}
		}
		if s.notRoundTrip == nil {
			continue
		}
		in := append([]byte("ab"), s.notRoundTrip...)
		if s.name == "utf-16le" || s.name == "utf-16be" {
			in = append([]byte{0, 'a'}, s.notRoundTrip...)
		}
		text, err := Decode(s.name, append(in, "zz"...))
		if !errors.As(err, &ce) || ce.Offset < 2 {
			t.Errorf("Decode(%s, %q) = %q, %v, want an error at offset 2 or later", s.name, in, text, err)
		}
		if bytes.ContainsRune(text, utf8.RuneError) {
			t.Errorf("Decode(%s) substituted U+FFFD", s.name)
		}
	}
	if _, err := Decode("ebcdic", nil); err == nil {
		t.Error("Decode of an unknown charset succeeded")
	}
	if _, err := Encode("latin1", []byte("a\xffb")); err == nil {
		t.Error("Encode of text that is not UTF-8 succeeded")
	}
}

// A range cut inside a character decodes up to that character.
func TestDecodePrefix(t *testing.T) {
	text, n, err := DecodePrefix("shift_jis", []byte("a\x93\xfa\x96"))
	if err != nil || n != 3 || string(text) != "a日" {
		t.Errorf("DecodePrefix = %q, %d, %v; want \"a日\", 3", text, n, err)
	}
	if _, _, err := DecodePrefix("shift_jis", []byte("\x93 \x93\xfa\x93\xfa\x93\xfa")); err == nil {
		t.Error("DecodePrefix accepted a bad byte far from the end")
	}
}
