package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// hookRepo is a root holding a git repository (made by the host's git)
// with one commit, and a marker path outside the root that a planted
// hook would create.
func hookRepo(t *testing.T) (root, marker, payload string) {
	t.Helper()
	root = t.TempDir()
	marker = filepath.Join(t.TempDir(), "hook-ran")
	payload = "#!/bin/sh\necho ran > " + marker + "\n"
	git(t, root, "init", "-q")
	putFile(t, filepath.Join(root, "a.txt"), "a\n", 0o644)
	git(t, root, "add", "a.txt")
	git(t, root, "commit", "-q", "-m", "one")
	return root, marker, payload
}

// hostCommit makes a commit with the host's git in root and fails if the
// marker a planted hook writes appeared.
func hostCommit(t *testing.T, root, marker, what string) {
	t.Helper()
	f := filepath.Join(root, "commits.txt")
	old, _ := os.ReadFile(f)
	putFile(t, f, string(old)+what+"\n", 0o644)
	git(t, root, "add", "commits.txt")
	git(t, root, "commit", "-q", "-m", what)
	if fileExists(marker) {
		t.Fatalf("%s: the host's git commit ran a planted hook: %s exists", what, marker)
	}
}

// controlHook shows that the payload runs when the host itself puts it in
// the hooks directory of root, so that its absence proves something.
func controlHook(t *testing.T, root, hook, marker, payload string) {
	t.Helper()
	putFile(t, filepath.Join(root, hook), payload, 0o755)
	f := filepath.Join(root, "control.txt")
	putFile(t, f, "control\n", 0o644)
	git(t, root, "add", "control.txt")
	git(t, root, "commit", "-q", "-m", "control")
	if !fileExists(marker) {
		t.Fatalf("control: the host's hook %s did not run: the test would prove nothing", hook)
	}
}

// attackHook tries every way of planting payload as the hook at hook (an
// existing executable file) and expects the policy's refusal naming rule.
func attackHook(s *server, root, hook, payload, rule string) {
	s.t.Helper()
	cur := sha(readFile(s.t, filepath.Join(root, hook)))
	s.wantPolicy("fs_write", map[string]any{"path": hook, "content": payload, "if_sha256": cur}, rule)
	s.wantPolicy("fs_replace", map[string]any{"path": hook, "if_sha256": cur,
		"edits": []map[string]any{{"old": "exit 0", "new": payload}}}, rule)
	s.wantPolicy("fs_delete", map[string]any{"path": hook}, rule)
	s.wantPolicy("fs_write", map[string]any{"path": filepath.Join(filepath.Dir(hook), "post-commit"), "content": payload, "if_sha256": nil}, rule)
}

// derivedEntries is the attestation's derived list: "path <- from".
func derivedEntries(t *testing.T, s *server) []string {
	t.Helper()
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	pol := r.doc["confinement"].(map[string]any)["policy"].(map[string]any)
	var got []string
	for _, d := range pol["derived"].([]any) {
		m := d.(map[string]any)
		got = append(got, m["path"].(string)+" <- "+m["derived_from"].(string))
	}
	slices.Sort(got)
	return got
}

// TestPolicyDerivedHusky: husky's core.hooksPath = .husky. With the
// defaults, .husky/** refuses the hook; without them, the hooks directory
// derived from .git/config does. The host's next commit runs nothing the
// agent wrote.
func TestPolicyDerivedHusky(t *testing.T) {
	for _, c := range []struct {
		flags []string
		rule  string
	}{{nil, ".husky/**"}, {[]string{"--no-default-protect"}, "derived from .git/config"}} {
		root, marker, payload := hookRepo(t)
		git(t, root, "config", "core.hooksPath", ".husky")
		putFile(t, filepath.Join(root, ".husky", "pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
		s := start(t, root, c.flags...)
		if got, want := derivedEntries(t, s), []string{".husky <- .git/config"}; !slices.Equal(got, want) {
			t.Fatalf("%v: derived %q, want %q", c.flags, got, want)
		}
		attackHook(s, root, ".husky/pre-commit", payload, c.rule)
		s.wantPolicy("fs_move", map[string]any{"from": "a.txt", "to": ".husky/pre-push"}, c.rule)
		s.wantPolicy("fs_move", map[string]any{"from": ".husky", "to": "h2"}, c.rule)
		hostCommit(t, root, marker, "husky "+c.rule)
		controlHook(t, root, ".husky/pre-commit", marker, payload)
	}
}

// TestPolicyDerivedInclude: core.hooksPath set in a file that .git/config
// includes (and one that an includeIf pulls in) protects that hooks
// directory, and the included files themselves.
func TestPolicyDerivedInclude(t *testing.T) {
	root, marker, payload := hookRepo(t)
	putFile(t, filepath.Join(root, "conf", "git.cfg"), "[includeIf \"onbranch:nowhere\"]\n\tpath = extra.cfg\n[core]\n\thooksPath = ci/hooks\n", 0o644)
	putFile(t, filepath.Join(root, "conf", "extra.cfg"), "[user]\n\tname = x\n", 0o644)
	git(t, root, "config", "include.path", "../conf/git.cfg")
	putFile(t, filepath.Join(root, "ci", "hooks", "pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
	s := start(t, root)
	want := []string{"ci/hooks <- conf/git.cfg", "conf/extra.cfg <- conf/git.cfg", "conf/git.cfg <- .git/config"}
	if got := derivedEntries(t, s); !slices.Equal(got, want) {
		t.Fatalf("derived %q, want %q", got, want)
	}
	attackHook(s, root, "ci/hooks/pre-commit", payload, "derived from conf/git.cfg")
	s.wantPolicy("fs_mkdir", map[string]any{"path": "ci/hooks/sub"}, "derived from conf/git.cfg")
	s.wantPolicy("fs_move", map[string]any{"from": "ci", "to": "ci2"}, "derived from conf/git.cfg")
	// The included files: editing one would change core.hooksPath, or
	// set core.fsmonitor.
	for _, f := range []string{"conf/git.cfg", "conf/extra.cfg"} {
		s.wantPolicy("fs_write", map[string]any{"path": f, "content": "[core]\n\tfsmonitor = sh evil.sh\n",
			"if_sha256": sha(readFile(t, filepath.Join(root, f)))}, "derived from")
	}
	s.wantOK("fs_write", map[string]any{"path": "conf/other.cfg", "content": "x\n", "if_sha256": nil})
	hostCommit(t, root, marker, "include")
	controlHook(t, root, "ci/hooks/pre-commit", marker, payload)
}

// TestPolicyDerivedHostChangesConfig: the host changes core.hooksPath
// while fsmcp runs, and makes a new repository; the next call judges by
// the configuration as it is now.
func TestPolicyDerivedHostChangesConfig(t *testing.T) {
	root, marker, payload := hookRepo(t)
	harmless := "#!/bin/sh\nexit 0\n"
	putFile(t, filepath.Join(root, "myhooks", "pre-commit"), harmless, 0o755)
	s := start(t, root)
	// Not a hooks directory yet: an ordinary write works.
	s.wantOK("fs_write", map[string]any{"path": "myhooks/pre-commit", "content": harmless, "if_sha256": sha([]byte(harmless))})
	git(t, root, "config", "core.hooksPath", "myhooks")
	attackHook(s, root, "myhooks/pre-commit", payload, "derived from .git/config")
	hostCommit(t, root, marker, "after the host's change")
	// The host moves it on: the old directory is free, the new one not.
	putFile(t, filepath.Join(root, "hooks2", "pre-commit"), harmless, 0o755)
	git(t, root, "config", "core.hooksPath", "hooks2")
	s.wantOK("fs_write", map[string]any{"path": "myhooks/notes.txt", "content": "x\n", "if_sha256": nil})
	attackHook(s, root, "hooks2/pre-commit", payload, "derived from .git/config")
	hostCommit(t, root, marker, "after the second change")
	// A repository the host makes while fsmcp runs.
	sub := filepath.Join(root, "sub")
	git(t, sub, "init", "-q")
	git(t, sub, "config", "core.hooksPath", "githooks")
	s.wantPolicy("fs_mkdir", map[string]any{"path": "sub/githooks"}, "derived from sub/.git/config")
	want := []string{"hooks2 <- .git/config", "sub/githooks <- sub/.git/config"}
	if got := derivedEntries(t, s); !slices.Equal(got, want) {
		t.Fatalf("derived %q, want %q", got, want)
	}
	controlHook(t, root, "hooks2/pre-commit", marker, payload)
}
