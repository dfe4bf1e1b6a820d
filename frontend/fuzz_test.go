package frontend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzArguments feeds raw bytes as params.arguments to every tool's
// validation. Property: it never panics; it accepts only valid UTF-8 JSON
// objects without repaired characters; everything else is
// invalid_argument (args_mismatch needs _meta, which is not fuzzed here).
func FuzzArguments(f *testing.F) {
	for _, seed := range []string{`{}`, `{"path":"a"}`, `{"path":"a","bogus":1}`, `{"path":5}`, `{"Path":"a"}`,
		`{"path":null}`, `{"path":"\ud800"}`, "{\"path\":\"\xff\"}", `[]`, `null`, `"x"`, `{"offset":-1}`,
		`{"path":"a","offset":1e400}`, `{"if_sha256":null,"path":"x","content":"y"}`, `{"edits":[{"old":"a","new":"b"}]}`,
		`{"pattern":"--pre=sh","path":"."}`, `{"path":"a"} trailing`, `{"path":"\u0000"}`} {
		f.Add([]byte(seed))
	}
	tools := allTools()
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, tool := range tools {
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool.name, Arguments: raw}}
			in, err := tool.decode(context.Background(), req)
			if err != nil {
				var te *toolError
				if !errors.As(err, &te) || te.code != fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT {
					t.Fatalf("%s(%q): error %v, want invalid_argument", tool.name, raw, err)
				}
				continue
			}
			if len(raw) > 0 && (!utf8.Valid(raw) || !json.Valid(raw)) {
				t.Fatalf("%s accepted %q", tool.name, raw)
			}
			if in == nil {
				t.Fatalf("%s(%q): accepted without a decoded input", tool.name, raw)
			}
		}
	})
}

// FuzzFitContent checks fitContent against the rune-by-rune definition:
// the longest prefix whose JSON string content fits avail bytes, cut at a
// rune boundary when it is UTF-8, and the encoded length it reports.
func FuzzFitContent(f *testing.F) {
	for _, seed := range []string{"", "abc", "a\"b\\c\n", "\x00\x01", "héllo wörld", "日本語", "\xff\xfe", "ab\xe6\x97"} {
		for _, avail := range []int{-1, 0, 1, 2, 5, 6, 7, 64} {
			f.Add([]byte(seed), avail)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, avail int) {
		n, encoded, encoding := fitContent(data, avail)
		wantN, wantEncoding := fitReference(data, avail)
		if n != wantN || encoding != wantEncoding {
			t.Fatalf("fitContent(%q, %d) = %d %s, want %d %s", data, avail, n, encoding, wantN, wantEncoding)
		}
		var got int
		if encoding == "utf8" {
			got = len(jsontext.AppendString(nil, data[:n])) - 2
		} else {
			got = len(base64.StdEncoding.EncodeToString(data[:n]))
		}
		if got != encoded {
			t.Fatalf("fitContent(%q, %d): encoded length %d, the encoding is %d", data, avail, encoded, got)
		}
	})
}

func fitReference(data []byte, avail int) (int, string) {
	avail = max(avail, 0)
	if !utf8.Valid(data) {
		n := min(len(data), avail/4*3)
		if !utf8.Valid(data[:n]) {
			return n, "base64"
		}
		data = data[:n]
	}
	used, n := 0, 0
	for n < len(data) {
		r, size := utf8.DecodeRune(data[n:])
		cost := size
		if r < utf8.RuneSelf {
			cost = len(jsontext.AppendString(nil, data[n:n+1])) - 2
		}
		if used+cost > avail {
			break
		}
		used += cost
		n += size
	}
	return n, "utf8"
}
