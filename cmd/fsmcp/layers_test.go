package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hook runs a test hook action inside the front-end or the worker and
// returns its outcome: "ok" or the error text.
func (s *server) hook(action, arg string) string {
	s.t.Helper()
	r := s.call("fs_stat", map[string]any{"path": hookPrefix + action + ":" + arg})
	e, _ := r.doc["error"].(map[string]any)
	msg, _ := e["message"].(string)
	_, outcome, ok := strings.Cut(msg, "hook: ")
	if !ok {
		s.t.Fatalf("hook %s did not run: %s", action, r.text)
	}
	return outcome
}

func wantDenied(t *testing.T, what, outcome string) {
	t.Helper()
	if !strings.Contains(outcome, "permission denied") {
		t.Errorf("%s = %q, want the kernel's permission denied", what, outcome)
	}
}

// Layer proof: code in the worker that bypasses os.Root on purpose (a
// plain os.Open by host path) is still refused by Landlock outside the
// root, while the same call inside the root succeeds.
func TestLandlockStopsWorkerBypassingRoot(t *testing.T) {
	root, outside := tree(t)
	s := start(t, root)
	if got := s.hook("open", filepath.Join(root, "a.txt")); got != "ok" {
		t.Fatalf("worker open inside the root by host path = %q, want ok", got)
	}
	wantDenied(t, "worker open outside", s.hook("open", filepath.Join(outside, "secret.txt")))
	wantDenied(t, "worker open /etc/passwd", s.hook("open", "/etc/passwd"))
	wantDenied(t, "worker write outside", s.hook("write", filepath.Join(outside, "planted")))
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Fatal("the worker wrote outside the root")
	}
	if got := s.hook("write", filepath.Join(root, "planted")); got != "ok" {
		t.Fatalf("worker write inside the root = %q, want ok (read-write mode)", got)
	}
}

// Layer proof: the front-end holds no filesystem access after start-up,
// not even to the root it serves.
func TestFrontendCannotOpenFiles(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, p := range []string{filepath.Join(root, "a.txt"), root, "/etc/passwd", "/proc/self/status"} {
		wantDenied(t, "front-end open "+p, s.hook("frontend-open", p))
	}
	wantDenied(t, "front-end write", s.hook("frontend-write", filepath.Join(root, "x")))
}

// Layer proof: under --read-only the kernel refuses writes in the worker,
// whatever the worker's code tries.
func TestReadOnlyEnforcedByKernel(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root, "--read-only")
	target := filepath.Join(root, "new.txt")
	wantDenied(t, "worker write under --read-only", s.hook("write", target))
	wantDenied(t, "worker overwrite under --read-only", s.hook("write", filepath.Join(root, "a.txt")))
	if _, err := os.Stat(target); err == nil {
		t.Fatal("a file was created under --read-only")
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(b) != "hello\n" {
		t.Fatalf("a.txt changed under --read-only: %q", b)
	}
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	c := r.doc["confinement"].(map[string]any)
	if c["read_only"] != true || c["read_only_enforced"] != true {
		t.Errorf("confinement under --read-only = %v", c)
	}
}
