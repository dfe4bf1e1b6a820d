package frontend

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func sha256Sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func TestAuditPaths(t *testing.T) {
	byName := map[string]*tool{}
	for _, tl := range everyTool() {
		byName[tl.name] = tl
	}
	long := strings.Repeat("é", maxAuditPath) // 2 bytes each
	many := make([]string, maxAuditListPaths+1)
	for i := range many {
		many[i] = `"x"`
	}
	for _, c := range []struct {
		tool    string
		args    string
		want    string
		clipped bool
	}{
		{"fs_read", `{"path":"a/b.txt"}`, `{"path":"a/b.txt"}`, false},
		{"fs_read", `{"path":"/a"}`, `{"path":"a"}`, false},
		{"fs_read", `{"path_base64":"/2E="}`, `{"path_base64":"/2E="}`, false},
		{"fs_read", `{"path_base64":"aGk="}`, `{"path":"hi"}`, false},
		{"fs_read", `{"path_base64":"!!"}`, ``, false},
		{"fs_move", `{"from":"a","to_base64":"/w=="}`, `{"from":"a","to_base64":"/w=="}`, false},
		{"fs_copy", `{"from":"/a","to":"b"}`, `{"from":"a","to":"b"}`, false},
		{"fs_glob", `{"pattern":"*.go","glob":["x"]}`, ``, false},
		{"fs_read", `{"path":7}`, ``, false},
		{"fs_read", `{}`, ``, false},
		{"fs_read", `[]`, ``, false},
		{"fs_read", ``, ``, false},
		{"fs_read", `{"path":"a\nb\"c"}`, `{"path":"a\nb\"c"}`, false},
		{"fs_read", `{"path":"` + long + `"}`, `{"path":"` + long[:maxAuditPath] + `"}`, true},
		{"fs_read_many", `{"paths":["a","/b",{"path_base64":"/w=="}]}`, `{"paths":["a","b",{"path_base64":"/w=="}]}`, false},
		{"fs_read_many", `{"paths":[` + strings.Join(many, ",") + `]}`,
			`{"paths":[` + strings.Join(many[:maxAuditListPaths], ",") + `]}`, true},
		{"fs_patch", `{"patch":"p","if_sha256":{"b":null,"a":"x"},"if_sha256_base64":{"/w==":null}}`,
			`{"files":["a","b",{"path_base64":"/w=="}]}`, false},
		{"fs_exec", `{"argv":["x"],"cwd":"sub"}`, `{"cwd":"sub"}`, false},
		{"fs_vcs_diff", `{"backend":"git","path":"r","files":["f","g"]}`, `{"path":"r","files":["f","g"]}`, false},
	} {
		var args map[string]any
		json.Unmarshal([]byte(c.args), &args)
		o, clipped := auditPaths(byName[c.tool], args)
		got := ""
		if o != nil {
			got = string(o.bytes())
		}
		if got != c.want || clipped != c.clipped {
			t.Errorf("auditPaths(%s %.60s) = %.80s, %v; want %.80s, %v", c.tool, c.args, got, clipped, c.want, c.clipped)
		}
	}
}

func TestAuditLine(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	req := &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Name: "fs_read", Arguments: json.RawMessage(`{"path":"x","content":"SECRET"}`)},
		Extra:  &mcp.RequestExtra{Header: http.Header{http.CanonicalHeaderKey(peerHeader): {"127.0.0.1:5"}}},
	}
	res := errorResult(errf(7, "m"))
	res.Meta = mcp.Meta{"scope_violation": true}
	read := readTool.tool()
	line := auditLine(start, 1500*time.Microsecond, read, req, &callRecord{}, res, nil, nil)
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil || line[len(line)-1] != '\n' || strings.Count(string(line), "\n") != 1 {
		t.Fatalf("not one JSON line: %q %v", line, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	want := map[string]any{"time": "2026-01-02T03:04:05.000000006Z", "event": "tool_call", "session": "", "peer": "127.0.0.1:5",
		"tool": "fs_read", "paths": map[string]any{"path": "x"}, "outcome": codeName(7), "duration_us": 1500.0,
		"reply_bytes": float64(len(text)), "scope_violation": true}
	g, _ := json.Marshal(doc)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("audit line\n got %s\nwant %s", g, w)
	}
	if strings.Contains(string(line), "SECRET") {
		t.Errorf("audit line carries argument content: %s", line)
	}
	line = auditLine(start, 0, statTool.tool(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, &callRecord{}, nil, errors.New("x"), nil)
	if !strings.Contains(string(line), `"session":"stdio"`) || !strings.Contains(string(line), `"outcome":"protocol_error"`) {
		t.Errorf("audit line %s", line)
	}
}

// BenchmarkAuditLine: the audit line of an fs_stat call (one path, from
// the typed decoding) and of an fs_read_many call of 64 paths.
func BenchmarkAuditLine(b *testing.B) {
	start := time.Now()
	res := okResult(newObj().bool("ok", true))
	stat := statTool.tool()
	many := make([]any, 64)
	for i := range many {
		many[i] = fmt.Sprintf("dir/file%02d.txt", i)
	}
	for _, c := range []struct {
		name string
		t    *tool
		args map[string]any
	}{
		{"stat", stat, map[string]any{"path": "dir/f4k"}},
		{"read_many_64", readManyTool.tool(), map[string]any{"paths": many}},
	} {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: c.t.name}}
		rec := &callRecord{args: c.args, outcome: "ok", replyBytes: 100, res: res}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				auditLine(start, time.Millisecond, c.t, req, rec, res, nil, nil)
			}
		})
	}
}
