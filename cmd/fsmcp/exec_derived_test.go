package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// derivedExecRepo is hookRepo with core.hooksPath = .githooks, a directory
// no default glob covers, holding a hook the host's git runs at each
// commit, which does nothing yet.
func derivedExecRepo(t *testing.T) (root, marker, payload string) {
	t.Helper()
	root, marker, payload = hookRepo(t)
	git(t, root, "config", "core.hooksPath", ".githooks")
	putFile(t, filepath.Join(root, ".githooks/pre-commit"), "#!/bin/sh\n:\n", 0o755)
	putFile(t, filepath.Join(root, "work/ok.txt"), "ok\n", 0o644)
	return root, marker, payload
}

// A writable command cannot plant a hook in the hooks directory a
// repository's core.hooksPath names: it can neither append to the hook,
// replace it, nor add one, and the host's next commit runs nothing. Once
// the host points core.hooksPath elsewhere while fsmcp runs, the next
// command finds the new directory protected and the old one writable; a
// hooks directory that does not exist yet cannot be made. The control shows that the host's git runs what lies at those paths, and
// the schema of fs_exec takes no protected paths from the client.
func TestExecDerivedHooksPath(t *testing.T) {
	root, marker, payload := derivedExecRepo(t)
	s := start(t, root, "--exec-writable", "--exec", "/bin/sh", "--exec", "/usr/bin/mkdir")
	line := strings.TrimPrefix(payload, "#!/bin/sh\n")
	for _, script := range []string{
		"printf '%s' '" + line + "' >> .githooks/pre-commit",
		"printf '%s' '" + payload + "' > .githooks/pre-commit",
		"printf '%s' '" + payload + "' > .githooks/post-commit",
	} {
		if code, r := s.shExit(script); code == 0 {
			t.Errorf("%q succeeded in the derived hooks directory: %s", script, r.text)
		}
	}
	if code, r := s.shExit("echo more >> work/ok.txt"); code != 0 {
		t.Fatalf("a write elsewhere refused: %s", r.text)
	}
	hostCommit(t, root, marker, "after the commands")
	if b := string(readFile(t, filepath.Join(root, ".githooks/pre-commit"))); b != "#!/bin/sh\n:\n" {
		t.Errorf(".githooks/pre-commit = %q", b)
	}
	s.wantErr("fs_exec", map[string]any{"argv": []string{"/bin/sh", "-c", "true"}, "protected": []string{}}, "invalid_argument")

	// The host moves the hooks directory while fsmcp runs.
	git(t, root, "config", "core.hooksPath", "hooks2")
	if err := os.Mkdir(filepath.Join(root, "hooks2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, r := s.shExit("echo x > hooks2/x"); code == 0 {
		t.Errorf("the new hooks directory is writable: %s", r.text)
	}
	if code, r := s.shExit("echo x > .githooks/x"); code != 0 {
		t.Errorf("the former hooks directory is still protected: %s", r.text)
	}
	if fileExists(filepath.Join(root, "hooks2/x")) || !fileExists(filepath.Join(root, ".githooks/x")) {
		t.Errorf("hooks2/x exists or .githooks/x does not")
	}
	// A hooks directory that does not exist yet cannot be made.
	git(t, root, "config", "core.hooksPath", "work/hooks")
	if code, r := s.shExit("mkdir work/hooks"); code == 0 || fileExists(filepath.Join(root, "work/hooks")) {
		t.Errorf("the hooks directory could be made: %s", r.text)
	}
	if code, r := s.shExit("echo x > work/new.txt"); code == 0 {
		t.Errorf("a name was made beside the future hooks directory: %s", r.text)
	}
	controlHook(t, root, "work/hooks/pre-commit", marker, payload)
}

// A writable command does not run while a file that the call's --rules
// deny, or that derived protection covers, has a second name in the root;
// it runs once the second name is gone.
func TestExecSecondNameRulesAndDerived(t *testing.T) {
	root, _, _ := derivedExecRepo(t)
	putFile(t, filepath.Join(root, "private.txt"), "PRIVATE\n", 0o644)
	link := func(from, to string) {
		if err := os.Link(filepath.Join(root, from), filepath.Join(root, to)); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, root, "--exec-writable", "--exec", "/bin/sh", "--rules", rulesFile(t, root, "deny * private.txt\n"))
	if code, r := s.shExit("true"); code != 0 {
		t.Fatalf("with no second name: %s", r.text)
	}
	for _, c := range []struct{ file, other, why string }{
		{".githooks/pre-commit", "work/pc", "protected"},
		{"private.txt", "work/p", "denied"},
	} {
		link(c.file, c.other)
		r := s.wantErr("fs_exec", sh("echo x >> "+c.other), "precondition_failed")
		if e := r.doc["error"].(map[string]any); e["path"] != c.file ||
			!strings.Contains(e["message"].(string), c.why+" by the policy and has a second name in the root, "+c.other) {
			t.Errorf("the refusal does not name %s and %s: %s", c.file, c.other, r.text)
		}
		if err := os.Remove(filepath.Join(root, c.other)); err != nil {
			t.Fatal(err)
		}
		if code, r := s.shExit("true"); code != 0 {
			t.Errorf("once %s is gone: %s", c.other, r.text)
		}
	}
	if b := string(readFile(t, filepath.Join(root, "private.txt"))); b != "PRIVATE\n" {
		t.Errorf("private.txt = %q", b)
	}
}
