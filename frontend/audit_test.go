package frontend

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
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
	long := strings.Repeat("é", maxAuditPath) // 2 bytes each
	for _, c := range []struct {
		args    string
		want    string
		clipped bool
	}{
		{`{"path":"a/b.txt"}`, `{"path":"a/b.txt"}`, false},
		{`{"path":"/a"}`, `{"path":"a"}`, false},
		{`{"path_base64":"/2E="}`, `{"path_base64":"/2E="}`, false},
		{`{"path_base64":"aGk="}`, `{"path":"hi"}`, false},
		{`{"path_base64":"!!"}`, ``, false},
		{`{"from":"a","to_base64":"/w=="}`, `{"from":"a","to_base64":"/w=="}`, false},
		{`{"pattern":"*.go","glob":["x"]}`, ``, false},
		{`{"path":7}`, ``, false},
		{`{}`, ``, false},
		{`[]`, ``, false},
		{``, ``, false},
		{`{"path":"a\nb\"c"}`, `{"path":"a\nb\"c"}`, false},
		{`{"path":"` + long + `"}`, `{"path":"` + long[:maxAuditPath] + `"}`, true},
	} {
		var args map[string]any
		json.Unmarshal([]byte(c.args), &args)
		o, clipped := auditPaths(args)
		got := ""
		if o != nil {
			got = string(o.bytes())
		}
		if got != c.want || clipped != c.clipped {
			t.Errorf("auditPaths(%.60s) = %.80s, %v; want %.80s, %v", c.args, got, clipped, c.want, c.clipped)
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
	line := auditLine(start, 1500*time.Microsecond, "fs_read", req, &callRecord{}, res, nil, nil)
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
	line = auditLine(start, 0, "fs_stat", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, &callRecord{}, nil, errors.New("x"), nil)
	if !strings.Contains(string(line), `"session":"stdio"`) || !strings.Contains(string(line), `"outcome":"protocol_error"`) {
		t.Errorf("audit line %s", line)
	}
}
