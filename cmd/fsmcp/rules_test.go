package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rulesFile writes text as a rules file outside root and returns its path.
func rulesFile(t *testing.T, root, text string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(root), "conf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "rules")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRulesEndToEnd: through the confined worker (which alone reads the
// file), deny is permission_denied with _meta.policy_violation on the path
// as it resolves, ask puts the call before the person, allow runs a call
// --ask would have asked about, and the first matching line wins. The file
// is read again after an atomic replace and after an edit in place; a bad
// edit keeps the rules and is logged.
func TestRulesEndToEnd(t *testing.T) {
	root, _ := tree(t)
	os.MkdirAll(filepath.Join(root, "notes"), 0o755)
	os.WriteFile(filepath.Join(root, "notes", "ok.txt"), nil, 0o644)
	os.Symlink("notes", filepath.Join(root, "lnk"))
	file := rulesFile(t, root, "allow fs_write notes/ok.txt\ndeny fs_write notes\nask fs_write sub\nallow fs_delete sub/**\n")
	p := &person{answer: answering("accept", false)}
	s := startWith(t, root, &mcp.ClientOptions{ElicitationHandler: p.handle}, "2026-07-28",
		"--rules", file, "--ask", "fs_delete")
	write := func(path string) reply {
		return s.call("fs_write", map[string]any{"path": path, "content": "x", "if_sha256": nil})
	}
	for _, spelled := range []string{"notes/new.txt", "sub/../notes/new.txt", "lnk/new.txt", "/notes/new.txt"} {
		r := write(spelled)
		if r.code() != "permission_denied" || r.meta["policy_violation"] != true || !strings.Contains(r.text, "line 2") {
			t.Errorf("write %s: %s (meta %v), want denied by line 2", spelled, r.text, r.meta)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "notes", "new.txt")); !os.IsNotExist(err) {
		t.Fatal("a denied write created the file")
	}
	s.wantOK("fs_write", map[string]any{"path": "notes/ok.txt", "content": "x", "if_sha256": sha(nil)})
	s.wantOK("fs_write", map[string]any{"path": "sub/new.txt", "content": "x", "if_sha256": nil})
	if n := len(p.asked()); n != 1 {
		t.Fatalf("asked %d times, want once (the ask rule)", n)
	}
	s.wantOK("fs_delete", map[string]any{"path": "sub/new.txt"})
	if n := len(p.asked()); n != 1 {
		t.Errorf("asked %d times: the allow rule should have spared the --ask of fs_delete", n)
	}
	s.wantOK("fs_delete", map[string]any{"path": "a.txt"})
	if n := len(p.asked()); n != 2 {
		t.Errorf("asked %d times: a delete no rule covers is asked (--ask)", n)
	}
	wantDecisions(t, s, "fs_write", "denied_by_rule", "denied_by_rule", "denied_by_rule", "denied_by_rule",
		"allowed_by_rule", "asked", "accepted")
	for _, e := range auditLines(t, s.stderr.String()) {
		if e.Tool == "fs_write" && e.PolicyViolation != (e.Decision == "denied_by_rule") {
			t.Errorf("audit: fs_write decided %s with policy_violation %v", e.Decision, e.PolicyViolation)
		}
	}

	// An atomic replace: a new inode under the same name.
	tmp := file + ".tmp"
	os.WriteFile(tmp, []byte("deny fs_read sub\n"), 0o600)
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	s.wantErr("fs_read", map[string]any{"path": "sub/b.txt"}, "permission_denied")
	// An edit in place, as an editor that writes the file itself.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("deny fs_stat sub\n")
	f.Close()
	s.wantOK("fs_read", map[string]any{"path": "sub/b.txt"})
	s.wantErr("fs_stat", map[string]any{"path": "sub/b.txt"}, "permission_denied")
	// A bad edit keeps the rules in force, and says why once.
	os.WriteFile(file, []byte("deny fs_stat sub\nforbid everything\n"), 0o600)
	s.wantErr("fs_stat", map[string]any{"path": "sub/b.txt"}, "permission_denied")
	s.wantErr("fs_stat", map[string]any{"path": "sub"}, "permission_denied")
	if n := strings.Count(s.stderr.String(), "keeping the previous rules: line 2"); n != 1 {
		t.Errorf("the bad edit was logged %d times, want once:\n%s", n, s.stderr.String())
	}
}

// TestRulesStartupRefusals: a rules file that does not parse, is missing,
// or lies inside the root (where the agent could rewrite it) stops fsmcp
// before it serves, saying why.
func TestRulesStartupRefusals(t *testing.T) {
	root, _ := tree(t)
	inside := filepath.Join(root, "rules")
	os.WriteFile(inside, []byte("allow * **\n"), 0o644)
	for name, c := range map[string]struct{ file, want string }{
		"bad line":    {rulesFile(t, root, "allow fs_read a\ngrant fs_write b\n"), "line 2"},
		"missing":     {filepath.Join(root, "..", "nope"), "--rules"},
		"inside root": {inside, "outside --root"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := fsmcpCommand(root, "--rules", c.file)
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err == nil {
				t.Fatal("fsmcp started")
			}
			if !strings.Contains(stderr.String(), c.want) || stdout.String() != "" {
				t.Errorf("stderr %q, stdout %q; want %q", stderr.String(), stdout.String(), c.want)
			}
		})
	}
}

// TestRulesFileNotReadableByWorker: the --rules file is read by a reader
// process of its own, so the worker (which faces the agent) is granted
// nothing beside it. Code in the confined worker that bypasses os.Root on
// purpose and opens, by host path, a token file kept next to the rules,
// or the rules file itself, is refused by the kernel; the rules are still
// in force and still read again after an atomic replace.
func TestRulesFileNotReadableByWorker(t *testing.T) {
	root, _ := tree(t)
	file := rulesFile(t, root, "deny fs_read a.txt\n")
	token := filepath.Join(filepath.Dir(file), "token")
	if err := os.WriteFile(token, []byte("secret token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--rules", file)
	if got := s.hook("open", filepath.Join(root, "sub", "b.txt")); got != "ok" {
		t.Fatalf("the probe cannot open a file in the root either: %s", got)
	}
	wantDenied(t, "worker open of the rules file's sibling", s.hook("open", token))
	wantDenied(t, "worker open of the rules file", s.hook("open", file))
	s.wantErr("fs_read", map[string]any{"path": "a.txt"}, "permission_denied")
	next := file + ".new"
	if err := os.WriteFile(next, []byte("deny fs_read sub\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, file); err != nil {
		t.Fatal(err)
	}
	s.wantOK("fs_read", map[string]any{"path": "a.txt"})
	s.wantErr("fs_read", map[string]any{"path": "sub/b.txt"}, "permission_denied")
	wantDenied(t, "worker open of the replaced rules file", s.hook("open", file))
}
