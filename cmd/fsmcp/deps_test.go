package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The package boundaries are part of the design: the front-end must not
// link the worker's code, the worker must not link the MCP SDK, the
// sandbox mechanics link neither, and what both processes share
// (proto/jsontext, proto/link) links none of them. The command runner, a
// process of its own, links neither the worker nor the front-end, and no
// package under worker/ links the worker's top package.
func TestPackageDependencies(t *testing.T) {
	const (
		mod      = "github.com/fsmcp/fsmcp/"
		frontend = mod + "frontend"
		worker   = mod + "worker"
		sandbox  = mod + "sandbox"
		sdk      = "github.com/modelcontextprotocol/go-sdk"
	)
	type rule struct{ pkg, forbidden string }
	rules := []rule{
		{frontend, worker},
		{worker, sdk},
		{worker, frontend},
		{sandbox, worker},
		{sandbox, frontend},
		{sandbox, sdk},
		{worker + "/command", worker},
		{worker + "/command", frontend},
	}
	for _, shared := range []string{mod + "proto/jsontext", mod + "proto/link"} {
		for _, f := range []string{worker, frontend, sandbox, sdk} {
			rules = append(rules, rule{shared, f})
		}
	}
	out, err := exec.Command("go", "list", worker+"/...").Output()
	if err != nil {
		t.Fatalf("go list %s/...: %v", worker, err)
	}
	below := strings.Fields(string(out))
	if len(below) < 3 {
		t.Fatalf("go list %s/... listed only %v", worker, below)
	}
	for _, p := range below {
		if r := (rule{p, worker}); p != worker && !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
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
			if d == r.forbidden || strings.HasPrefix(d, r.forbidden+"/") && !sameTree(r.pkg, d, worker) {
				t.Errorf("%s imports %s", r.pkg, d)
			}
		}
	}
}

// sameTree reports whether pkg and dep both lie under top/: packages
// below the worker's top package may link each other (worker/command
// links worker/rulesfile), but none links the top package itself.
func sameTree(pkg, dep, top string) bool {
	return strings.HasPrefix(pkg, top+"/") && strings.HasPrefix(dep, top+"/")
}
