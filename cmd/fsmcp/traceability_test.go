package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

var (
	hazardRow = regexp.MustCompile(`(?m)^\| (H\d+) \|`)
	traceRow  = regexp.MustCompile(`(?m)^\| (H\d+) \| ([^|]*)\|`)
	testName  = regexp.MustCompile(`^(Test|Fuzz|Benchmark)\w+$`)
)

// docs/TRACEABILITY.md stays honest: every hazard of docs/ACCEPTANCE.md
// has at least one test, every test it names exists (per go test -list),
// and it names no hazard that ACCEPTANCE does not define.
func TestTraceability(t *testing.T) {
	accept, err := os.ReadFile("../../docs/ACCEPTANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	trace, err := os.ReadFile("../../docs/TRACEABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	hazards := map[string]bool{}
	for _, m := range hazardRow.FindAllStringSubmatch(string(accept), -1) {
		if hazards[m[1]] {
			t.Errorf("ACCEPTANCE defines %s twice", m[1])
		}
		hazards[m[1]] = true
	}
	if len(hazards) < 60 {
		t.Fatalf("ACCEPTANCE defines %d hazards, want at least 60", len(hazards))
	}

	cmd := exec.Command("go", "test", "-list", ".", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go test -list: %v", err)
	}
	exists := map[string]bool{}
	for _, line := range strings.Fields(string(out)) {
		if testName.MatchString(line) {
			exists[line] = true
		}
	}

	covered := map[string]bool{}
	for _, m := range traceRow.FindAllStringSubmatch(string(trace), -1) {
		h := m[1]
		if !hazards[h] {
			t.Errorf("TRACEABILITY names %s, which ACCEPTANCE does not define", h)
		}
		var names []string
		for _, field := range strings.Split(m[2], ",") {
			if name := strings.Trim(strings.TrimSpace(field), "`"); name != "" {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			t.Errorf("%s has no test", h)
		}
		for _, name := range names {
			top, _, _ := strings.Cut(name, "/")
			if !exists[top] {
				t.Errorf("%s names %s, which go test -list does not know", h, name)
			}
		}
		covered[h] = len(names) > 0
	}
	for h := range hazards {
		if !covered[h] {
			t.Errorf("hazard %s has no row in TRACEABILITY", h)
		}
	}
}
