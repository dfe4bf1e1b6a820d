package worker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// Per charset: a word it holds beyond ASCII and its bytes there (written
// out, not computed by the code under test), a replacement word and its
// bytes, and text it cannot hold.
var charsetFiles = []struct {
	cs        string
	word      string
	wordBytes []byte
	repl      string
	replBytes []byte
	cannot    string
	wide      bool
}{
	{cs: "latin1", word: "café", wordBytes: []byte("caf\xe9"), repl: "señor", replBytes: []byte("se\xf1or"), cannot: "€"},
	{cs: "windows-1252", word: "€5", wordBytes: []byte("\x805"), repl: "café", replBytes: []byte("caf\xe9"), cannot: "ā"},
	{cs: "shift_jis", word: "日本", wordBytes: []byte("\x93\xfa\x96\x7b"), repl: "東京", replBytes: []byte("\x93\x8c\x8b\x9e"), cannot: "한"},
	{cs: "euc-jp", word: "日本", wordBytes: []byte("\xc6\xfc\xcb\xdc"), repl: "東京", replBytes: []byte("\xc5\xec\xb5\xfe"), cannot: "한"},
	{cs: "gbk", word: "中文", wordBytes: []byte("\xd6\xd0\xce\xc4"), repl: "汉字", replBytes: []byte("\xba\xba\xd7\xd6"), cannot: "한"},
	{cs: "gb18030", word: "中文", wordBytes: []byte("\xd6\xd0\xce\xc4"), repl: "汉字", replBytes: []byte("\xba\xba\xd7\xd6")},
	{cs: "big5", word: "中文", wordBytes: []byte("\xa4\xa4\xa4\xe5"), repl: "台灣", replBytes: []byte("\xa5\x78\xc6\x57"), cannot: "한"},
	{cs: "euc-kr", word: "한국", wordBytes: []byte("\xc7\xd1\xb1\xb9"), repl: "서울", replBytes: []byte("\xbc\xad\xbf\xef"), cannot: "😀"},
	{cs: "utf-16le", word: "é", wordBytes: []byte("\xe9\x00"), repl: "ü", replBytes: []byte("\xfc\x00"), wide: true},
	{cs: "utf-16be", word: "é", wordBytes: []byte("\x00\xe9"), repl: "ü", replBytes: []byte("\x00\xfc"), wide: true},
}

// wideASCII is ASCII text in UTF-16 (le or be).
func wideASCII(s string, be bool) []byte {
	var b []byte
	for _, c := range []byte(s) {
		if be {
			b = append(b, 0, c)
		} else {
			b = append(b, c, 0)
		}
	}
	return b
}

// fs_replace with charset, for each charset, on a file whose bytes are
// not UTF-8: the edit's text is matched and written in the charset, and
// every byte outside the edit stays as it was. Text the charset cannot
// hold, and a file with bytes that do not round-trip, are refused with
// the offset; nothing is written.
func TestReplaceCharsets(t *testing.T) {
	for _, c := range charsetFiles {
		t.Run(c.cs, func(t *testing.T) {
			s, dir := newWriteService(t)
			p := filepath.Join(dir, "f")
			asc := func(x string) []byte { return []byte(x) }
			if c.wide {
				be := c.cs == "utf-16be"
				asc = func(x string) []byte { return wideASCII(x, be) }
			}
			before := append(append(asc("one "), c.wordBytes...), asc(" two\n")...)
			after := append(asc("tail "), c.wordBytes...)
			old := append(append(slicesClone(before), asc("MID\n")...), after...)
			if err := os.WriteFile(p, old, 0o644); err != nil {
				t.Fatal(err)
			}
			resp, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum(old), Charset: c.cs,
				Edits: []*fsmcpv1.Edit{{Old: []byte("MID"), New: []byte(c.repl)}}})
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(slicesClone(before), append(c.replBytes, asc("\n")...)...), after...)
			got, _ := os.ReadFile(p)
			if !bytes.Equal(got, want) {
				t.Fatalf("file = %q, want %q", got, want)
			}
			if resp.GetSha256() != wsum(want) {
				t.Error("the reply's sha256 is not the file's")
			}
			// The word itself matches, in the charset's bytes.
			if _, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum(want), Charset: c.cs,
				Edits: []*fsmcpv1.Edit{{Old: []byte(c.word + " two"), New: []byte("x")}}}); err != nil {
				t.Fatalf("replace of the word: %v", err)
			}
			cur, _ := os.ReadFile(p)
			if c.cannot != "" {
				_, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum(cur), Charset: c.cs,
					Edits: []*fsmcpv1.Edit{{Old: []byte("x"), New: []byte("ab" + c.cannot)}}})
				e := wantWriteCode(t, "Replace", err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
				if e != nil && (e.Offset == nil || *e.Offset != 2) {
					t.Errorf("offset = %v, want 2", e.Offset)
				}
			}
			// A byte that does not round-trip, after the first line.
			bad := append(slicesClone(cur), 0xff)
			switch c.cs {
			case "latin1":
				bad = nil // every byte is Latin-1
			case "windows-1252":
				bad[len(bad)-1] = 0x81 // unassigned
			}
			if c.wide {
				bad = append(slicesClone(cur), 0x00)
			}
			if bad != nil {
				os.WriteFile(p, bad, 0o644)
				_, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum(bad), Charset: c.cs,
					Edits: []*fsmcpv1.Edit{{Old: []byte("x"), New: []byte("y")}}})
				e := wantWriteCode(t, "Replace", err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
				if e != nil && (e.Offset == nil || *e.Offset != int64(len(cur))) {
					t.Errorf("offset = %v, want %d", e.Offset, len(cur))
				}
				if got, _ := os.ReadFile(p); !bytes.Equal(got, bad) {
					t.Error("a refused replace changed the file")
				}
			}
		})
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// fs_write with charset writes the text's bytes in it; text it cannot
// hold is refused with its offset; without charset, content is bytes.
func TestWriteCharset(t *testing.T) {
	s, dir := newWriteService(t)
	p := filepath.Join(dir, "f")
	if _, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("f"), MustNotExist: true, Charset: "shift_jis", Content: []byte("日本\n")}); err != nil {
		t.Fatal(err)
	}
	if got := wcontent(t, p); got != "\x93\xfa\x96\x7b\n" {
		t.Errorf("f = %q", got)
	}
	_, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("g"), MustNotExist: true, Charset: "latin1", Content: []byte("abc€")})
	if e := wantWriteCode(t, "Write", err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT); e != nil && (e.Offset == nil || *e.Offset != 3) {
		t.Errorf("offset = %v, want 3", e.Offset)
	}
	_, err = s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("g"), MustNotExist: true, Charset: "ebcdic", Content: []byte("a")})
	wantWriteCode(t, "Write", err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	if _, err := s.Write(context.Background(), &fsmcpv1.WriteRequest{Path: []byte("h"), MustNotExist: true, Content: []byte("\xff\xfe")}); err != nil {
		t.Fatalf("bytes without charset: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "g")); !os.IsNotExist(err) {
		t.Error("a refused write created g")
	}
}

// eol "file": on a CRLF file, "\n" in old and new stands for "\r\n"; on
// an LF file, it is "\n"; a mixed file refuses it and says the counts.
func TestReplaceEOL(t *testing.T) {
	for _, tc := range []struct {
		name, old, want string
		code            fsmcpv1.ErrorCode
	}{
		{"crlf", "a\r\nb\r\nc\r\n", "a\r\nB\r\nX\r\nc\r\n", 0},
		{"lf", "a\nb\nc\n", "a\nB\nX\nc\n", 0},
		{"mixed", "a\r\nb\nc\r\n", "a\r\nb\nc\r\n", fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newWriteService(t)
			p := filepath.Join(dir, "f")
			wput(t, p, tc.old)
			_, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum([]byte(tc.old)), Eol: "file",
				Edits: []*fsmcpv1.Edit{{Old: []byte("a\nb\n"), New: []byte("a\nB\nX\n")}}})
			if tc.code != 0 {
				e := wantWriteCode(t, "Replace", err, tc.code)
				if e != nil && !bytes.Contains([]byte(e.Message), []byte("mixes 2 \\r\\n with 1 \\n")) {
					t.Errorf("message %q does not give the counts", e.Message)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := wcontent(t, p); got != tc.want {
				t.Errorf("f = %q, want %q", got, tc.want)
			}
		})
	}
	// Without eol, "\n" never matches "\r\n".
	s, dir := newWriteService(t)
	wput(t, filepath.Join(dir, "f"), "a\r\nb\r\n")
	_, err := s.Replace(context.Background(), &fsmcpv1.ReplaceRequest{Path: []byte("f"), IfSha256: wsum([]byte("a\r\nb\r\n")),
		Edits: []*fsmcpv1.Edit{{Old: []byte("a\nb"), New: []byte("x")}}})
	wantWriteCode(t, "Replace", err, fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH)
}
