package jsontext

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// appendStringReference is AppendString byte by byte, the definition the
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
			b = append(b, '\\', 'u', '0', '0', HexDigits[c>>4], HexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// FuzzAppendString checks AppendString, on bytes and on strings, against
// the byte-by-byte definition, at every alignment of the special bytes.
func FuzzAppendString(f *testing.F) {
	for _, seed := range []string{"", "abcdefgh", "abcdefg\"", "\\bcdefghijklmnop", "héllo wörld\n\t\r\x00\x1f\x7f",
		"0123456789abcdef\x01", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\"", "the quick brown fox jumps over the lazy dog\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want := appendStringReference([]byte("x"), s)
		if got := AppendString([]byte("x"), s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %q, want %q", s, got, want)
		}
		if got := AppendString([]byte("x"), string(s)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(string %q) = %q, want %q", s, got, want)
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
			if got := PlainWord(w); got != want {
				t.Fatalf("plainWord with byte %#x at %d = %v, want %v", c, pos, got, want)
			}
		}
	}
}

// inText is s as it stands inside a JSON string: AppendString without its
// quotes.
func inText(s []byte) []byte {
	e := appendStringReference(nil, s)
	return e[1 : len(e)-1]
}

// FuzzTextObjects checks AppendNameText against escaping AppendName's
// object once more, TextObjects's lengths against the objects', and that
// whatever TextObjects takes is, once the reply's text is decoded, one
// object with one member, path or path_base64, of the length it says.
func FuzzTextObjects(f *testing.F) {
	for _, seed := range [][]byte{[]byte("a/b.go"), []byte("bad\xffname"), []byte("q\"uote\\back\x01\n"), {},
		[]byte(`{\"path\":\"x\"}`), []byte(`{\"path\":\"x\",\"y\":1}`), []byte(`{\"path_base64\":\"!!\"}`),
		[]byte(`{\"path\":\"\\q\"}`), []byte(`{\"path\":\"\\u00zz\"}`), []byte(`{\"path\":\"\\\"\"}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		obj := append(AppendName([]byte("{"), "path", v), '}')
		text := AppendNameText(nil, "path", v)
		if want := inText(obj); !bytes.Equal(text, want) {
			t.Fatalf("AppendNameText(%q) = %q, want %q", v, text, want)
		}
		first := uint32(len(text))
		text = append(append(text, ','), AppendNameText(nil, "path", []byte("x"))...)
		sizes, ok := TextObjects(text, []uint32{first, uint32(len(text))}, "path", nil)
		if len(v) == 0 || v[0] == '/' {
			if ok {
				t.Fatalf("TextObjects took %q, whose first path is not relative", text)
			}
		} else if !ok || len(sizes) != 2 || int(sizes[0]) != len(obj) || sizes[1] != uint32(len(`{"path":"x"}`)) {
			t.Fatalf("TextObjects(%q) = %v, %v; want the lengths %d and 12", text, sizes, ok, len(obj))
		}
		// The bytes as they are, one object.
		sizes, ok = TextObjects(v, []uint32{uint32(len(v))}, "path", nil)
		if !ok {
			return
		}
		var doc string
		if err := json.Unmarshal([]byte(`"`+string(v)+`"`), &doc); err != nil {
			t.Fatalf("TextObjects took %q, which is not a JSON string's inside: %v", v, err)
		}
		if len(doc) != int(sizes[0]) {
			t.Fatalf("TextObjects took %q as %d bytes; it is %d", v, sizes[0], len(doc))
		}
		var m map[string]json.RawMessage
		d := json.NewDecoder(strings.NewReader(doc))
		if err := d.Decode(&m); err != nil || d.More() || len(m) != 1 {
			t.Fatalf("TextObjects took %q: %v, %d members", v, err, len(m))
		}
		for k, raw := range m {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || k != "path" && k != "path_base64" {
				t.Fatalf("TextObjects took %q: member %q = %s", v, k, raw)
			}
			if _, err := base64.StdEncoding.DecodeString(s); k == "path_base64" && err != nil {
				t.Fatalf("TextObjects took %q: %v", v, err)
			}
		}
	})
}

// TextObjects refuses what is not a run of one-member path objects as
// they stand in a reply's text, separated by commas, a path that is empty
// or absolute, and ends that do not cut the bytes exactly.
func TestTextObjectsRefusals(t *testing.T) {
	good := `{\"path\":\"a\\\"\\n\\u0001\"},{\"path_base64\":\"/w==\"}`
	first := uint32(strings.Index(good, ","))
	sizes, ok := TextObjects([]byte(good), []uint32{first, uint32(len(good))}, "path", nil)
	if !ok || len(sizes) != 2 || sizes[0] != uint32(len(`{"path":"a\"\n\u0001"}`)) || sizes[1] != uint32(len(`{"path_base64":"/w=="}`)) {
		t.Fatalf("TextObjects(%s) = %v, %v", good, sizes, ok)
	}
	for _, c := range []struct {
		text string
		ends []uint32
	}{
		{`{\"path\":\"a\"}`, []uint32{17}},
		{`{\"path\":\"a\"},{\"path\":\"b\"}`, []uint32{16}},
		{`{\"path\":\"a\"},{\"path\":\"b\"}`, []uint32{16, 6}},
		{`{\"path\":\"a\"}{\"path\":\"b\"}`, []uint32{16, 32}},
		{`{\"path\":\"a\"};{\"path\":\"b\"}`, []uint32{16, 33}},
		{`{\"path\":\"a\",\"ok\":false}`, []uint32{29}},
		{`{"path":"a"}`, []uint32{12}},
		{`{\"path\":\"a"\"}`, []uint32{17}},
		{`{\"path\":\"a\\\"}`, []uint32{18}},
		{`{\"path\":\"a\\"\"}`, []uint32{19}},
		{`{\"path\":\"a\\q\"}`, []uint32{19}},
		{`{\"path\":\"a\q\"}`, []uint32{18}},
		{`{\"path\":\"a\n\"}`, []uint32{18}},
		{`{\"path\":\"a\\u00g0\"}`, []uint32{23}},
		{`{\"path\":\"a\\u00\"}`, []uint32{21}},
		{"{\\\"path\\\":\\\"a\x01\\\"}", []uint32{17}},
		{"{\\\"path\\\":\\\"\xff\\\"}", []uint32{16}},
		{`{\"path_base64\":\"!\"}`, []uint32{23}},
		{`{\"name\":\"a\"}`, []uint32{16}},
		{`{\"path\":1}`, []uint32{12}},
		{`{\"path\":\"}`, []uint32{13}},
		{`{\"path\":\"\"}`, []uint32{15}},
		{`{\"path\":\"/etc/passwd\"}`, []uint32{26}},
		{`{\"path_base64\":\"\"}`, []uint32{22}},
		{`{\"path_base64\":\"L3g=\"}`, []uint32{26}},
	} {
		if _, ok := TextObjects([]byte(c.text), c.ends, "path", nil); ok {
			t.Errorf("TextObjects took %q cut at %v", c.text, c.ends)
		}
	}
}

// BenchmarkAppendString escapes a reply that is itself JSON (fs_glob's
// page of the Go tree, as the text of a tool result: a quote every few
// bytes), Go source (fs_read's usual content) and text with no byte to
// escape.
func BenchmarkAppendString(b *testing.B) {
	var page []byte
	page = append(page, `{"ok":true,"path":"","files":[`...)
	for i := range 9000 {
		if i > 0 {
			page = append(page, ',')
		}
		page = fmt.Appendf(page, `{"path":"src/cmd/compile/internal/pkg%d/file_%d.go"}`, i%97, i)
	}
	page = append(page, `]}`...)
	src, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "net", "http", "server.go"))
	if err != nil {
		b.Skip(err)
	}
	plain := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz "), 1<<14)
	lines := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog 0123456789\n"), 1<<13)
	for _, c := range []struct {
		name string
		in   []byte
	}{{"json", page}, {"source", src}, {"lines", lines}, {"plain", plain}} {
		b.Run(c.name, func(b *testing.B) {
			out := make([]byte, 0, 2*len(c.in))
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				out = AppendString(out[:0], string(c.in))
			}
		})
	}
}
