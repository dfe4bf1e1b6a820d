package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The package boundaries are part of the design: the front-end must not
// link the worker's code, the worker must not link the MCP SDK, the
// sandbox mechanics link neither, and the JSON text both sides share
// (proto/jsontext) links none of them.
func TestPackageDependencies(t *testing.T) {
	rules := []struct{ pkg, forbidden string }{
		{"github.com/fsmcp/fsmcp/frontend", "github.com/fsmcp/fsmcp/worker"},
		{"github.com/fsmcp/fsmcp/worker", "github.com/modelcontextprotocol/go-sdk"},
		{"github.com/fsmcp/fsmcp/worker", "github.com/fsmcp/fsmcp/frontend"},
		{"github.com/fsmcp/fsmcp/sandbox", "github.com/fsmcp/fsmcp/worker"},
		{"github.com/fsmcp/fsmcp/sandbox", "github.com/fsmcp/fsmcp/frontend"},
		{"github.com/fsmcp/fsmcp/sandbox", "github.com/modelcontextprotocol/go-sdk"},
		{"github.com/fsmcp/fsmcp/proto/jsontext", "github.com/fsmcp/fsmcp/worker"},
		{"github.com/fsmcp/fsmcp/proto/jsontext", "github.com/fsmcp/fsmcp/frontend"},
		{"github.com/fsmcp/fsmcp/proto/jsontext", "github.com/modelcontextprotocol/go-sdk"},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", r.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", r.pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 5 {
			t.Fatalf("go list -deps %s listed only %v", r.pkg, deps)
		}
		for _, d := range deps {
			if d == r.forbidden || strings.HasPrefix(d, r.forbidden+"/") {
				t.Errorf("%s imports %s", r.pkg, d)
			}
		}
	}
}
