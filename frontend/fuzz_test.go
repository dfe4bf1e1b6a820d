package frontend

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
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
			in, err := tool.decode(req)
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
