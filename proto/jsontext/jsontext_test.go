package jsontext

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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

// FuzzNameObjects: what AppendName renders, NameObjects takes, and
// encoding/json reads back the name; and whatever bytes NameObjects takes
// are objects of exactly one member, key or key_base64, whose value is a
// string (base64 for key_base64).
func FuzzNameObjects(f *testing.F) {
	for _, seed := range [][]byte{[]byte("a/b.go"), []byte("bad\xffname"), []byte("q\"uote\\back\x01\n"), {}, []byte(`{"path":"x"}`),
		[]byte(`{"path":"x","y":1}`), []byte(`{"path_base64":"!!"}`), []byte(`{"path":"\q"}`), []byte(`{"path":"\u00zz"}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		objs := append(AppendName([]byte("{"), "path", v), '}')
		first := uint32(len(objs))
		objs = append(append(objs, '{'), `"path":"x"}`...)
		if !NameObjects(objs, []uint32{first, uint32(len(objs))}, "path") {
			t.Fatalf("NameObjects refused %q", objs)
		}
		var back struct {
			Path       *string `json:"path"`
			PathBase64 []byte  `json:"path_base64"`
		}
		if err := json.Unmarshal(objs[:first], &back); err != nil {
			t.Fatalf("%q: %v", objs[:first], err)
		}
		got := back.PathBase64
		if back.Path != nil {
			got = []byte(*back.Path)
		}
		if !bytes.Equal(got, v) {
			t.Fatalf("%q reads back as %+v", objs[:first], back)
		}
		// The bytes as they are, one object.
		if NameObjects(v, []uint32{uint32(len(v))}, "path") {
			var m map[string]json.RawMessage
			d := json.NewDecoder(bytes.NewReader(v))
			if err := d.Decode(&m); err != nil || d.More() || len(m) != 1 {
				t.Fatalf("NameObjects took %q: %v, %d members", v, err, len(m))
			}
			for k, raw := range m {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil || k != "path" && k != "path_base64" {
					t.Fatalf("NameObjects took %q: member %q = %s", v, k, raw)
				}
				if _, err := base64.StdEncoding.DecodeString(s); k == "path_base64" && err != nil {
					t.Fatalf("NameObjects took %q: %v", v, err)
				}
			}
		}
	})
}

// NameObjects refuses what is not a run of one-member path objects, and
// ends that do not cut the bytes exactly.
func TestNameObjectsRefusals(t *testing.T) {
	ok := []byte(`{"path":"a"}{"path_base64":"/w=="}`)
	if !NameObjects(ok, []uint32{12, uint32(len(ok))}, "path") {
		t.Fatal("refused a good run")
	}
	for _, c := range []struct {
		objs string
		ends []uint32
	}{
		{`{"path":"a"}`, []uint32{13}},
		{`{"path":"a"}{"path":"b"}`, []uint32{12}},
		{`{"path":"a"}{"path":"b"}`, []uint32{12, 6}},
		{`{"path":"a","ok":false}`, []uint32{23}},
		{`{"path":"a"},{"path":"b"}`, []uint32{12, 25}},
		{`{"path":"a\"}`, []uint32{13}},
		{`{"path":"a\q"}`, []uint32{14}},
		{`{"path":"a\u00g0"}`, []uint32{18}},
		{"{\"path\":\"a\x01\"}", []uint32{14}},
		{"{\"path\":\"\xff\"}", []uint32{13}},
		{`{"path_base64":"!"}`, []uint32{19}},
		{`{"name":"a"}`, []uint32{12}},
		{`{"path":1}`, []uint32{10}},
		{`{"path":"}`, []uint32{10}},
	} {
		if NameObjects([]byte(c.objs), c.ends, "path") {
			t.Errorf("NameObjects took %q cut at %v", c.objs, c.ends)
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
