package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

// The protected/deny policy, end to end: the real binary, its confined
// worker, a go-sdk client, and the host's real git.

// wantPolicy fails unless the call was refused by the policy:
// permission_denied, a message naming the rule, _meta.policy_violation.
func (s *server) wantPolicy(name string, args any, rule string) reply {
	s.t.Helper()
	r := s.call(name, args)
	if !r.isError || r.code() != "permission_denied" {
		s.t.Fatalf("%s(%.300v) = %.1000s, want permission_denied by the policy", name, args, r.text)
	}
	if pv, _ := r.meta["policy_violation"].(bool); !pv {
		s.t.Fatalf("%s(%.300v): no _meta.policy_violation: %v", name, args, r.meta)
	}
	msg, _ := r.doc["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, rule) {
		s.t.Fatalf("%s(%.300v): message %q does not name the rule %q", name, args, msg, rule)
	}
	return r
}

// policyTree is a root with a git repository (made by the host's git), a
// nested one, the editor and direnv files, and an operator-protected
// build directory.
func policyTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	git(t, root, "init", "-q")
	git(t, filepath.Join(root, "vendor", "lib"), "init", "-q")
	for p, content := range map[string]string{
		".gitmodules":            "",
		".gitattributes":         "* text=auto\n",
		".envrc":                 "export A=1\n",
		".vscode/tasks.json":     "{}\n",
		".idea/workspace.xml":    "<x/>\n",
		".git/info/exclude":      "# exclude\n",
		"build/out.sh":           "echo built\n",
		"src/main.go":            "package main\n",
		"vendor/lib/src/x.go":    "package x\n",
		".git/hooks/pre-commit":  "#!/bin/sh\nexit 0\n",
		"notes/hooks/pre-commit": "not a hook\n",
	} {
		putFile(t, filepath.Join(root, p), content, 0o644)
	}
	return root
}

// putFile writes a file on the host, making its parents.
func putFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, []byte(content), mode)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// mutations are every mutating tool's calls on the path p, which the
// policy must refuse: on a file that exists, or on a name that does not.
func mutations(t *testing.T, root, p string) []map[string]any {
	t.Helper()
	var cur any // null: must not exist
	_, err := os.Lstat(filepath.Join(root, p))
	exists := err == nil
	content, err := os.ReadFile(filepath.Join(root, p))
	if err == nil {
		cur = sha(content)
	}
	ms := []map[string]any{
		{"tool": "fs_write", "path": p, "content": "#!/bin/sh\ntouch PLANTED\n", "if_sha256": cur},
		{"tool": "fs_replace", "path": p, "edits": []map[string]any{{"old": "e", "new": "E", "all": true}}, "if_sha256": cur},
		{"tool": "fs_delete", "path": p, "recursive": true},
		{"tool": "fs_move", "from": p, "to": "moved-away"},
		{"tool": "fs_move", "from": "src/main.go", "to": p},
		{"tool": "fs_move", "from": "src", "to": p},
		{"tool": "fs_write", "path": p, "content": "touch PLANTED\n", "if_sha256": cur, "append": true},
		{"tool": "fs_splice", "path": p, "offset": 0, "insert": "touch PLANTED\n", "if_sha256": cur},
		{"tool": "fs_copy", "from": "src/main.go", "to": p},
		{"tool": "fs_copy", "from": "src", "to": p, "recursive": true},
	}
	if exists {
		ms = append(ms, map[string]any{"tool": "fs_copy", "from": p, "to": "copied-away", "recursive": true})
	}
	if len(content) > 0 {
		first, _, _ := strings.Cut(string(content), "\n")
		ms = append(ms, map[string]any{"tool": "fs_patch", "if_sha256": map[string]any{p: cur},
			"patch": "--- a/" + p + "\n+++ b/" + p + "\n@@ -1 +1 @@\n-" + first + "\n+touch PLANTED\n"})
	}
	if !exists {
		ms = append(ms, map[string]any{"tool": "fs_mkdir", "path": p}, map[string]any{"tool": "fs_mkdir", "path": p + "/d"},
			map[string]any{"tool": "fs_patch", "if_sha256": map[string]any{p: nil},
				"patch": "--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +1 @@\n+touch PLANTED\n"})
	}
	return ms
}

func (s *server) wantPolicyAll(ms []map[string]any, rule string) {
	s.t.Helper()
	for _, m := range ms {
		tool := m["tool"].(string)
		args := map[string]any{}
		for k, v := range m {
			if k != "tool" {
				args[k] = v
			}
		}
		s.wantPolicy(tool, args, rule)
	}
}

// TestPolicyProtectEveryToolEveryGlob: a path under every default glob
// and an operator glob, through every mutating tool, is refused with
// nothing changed.
func TestPolicyProtectEveryToolEveryGlob(t *testing.T) {
	root := policyTree(t)
	putFile(t, filepath.Join(root, "tree", "hooks", "pre-commit"), "#!/bin/sh\n", 0o755)
	putFile(t, filepath.Join(root, "tree2", "config"), "[core]\n", 0o644)
	s := start(t, root, "--protect", "build/**")
	before := snapshot(t, root)
	for _, c := range []struct{ path, rule string }{
		{".git/hooks/pre-commit", ".git/hooks/**"},
		{".git/hooks/post-checkout", ".git/hooks/**"},
		{".git/config", ".git/config"},
		{".git/info/exclude", ".git/info/**"},
		{".git/info/attributes", ".git/info/**"},
		{".gitmodules", ".gitmodules"},
		{".gitattributes", ".gitattributes"},
		{".envrc", ".envrc"},
		{".vscode/tasks.json", ".vscode/**"},
		{".vscode/settings.json", ".vscode/**"},
		{".idea/workspace.xml", ".idea/**"},
		{".git/HEAD", "(--protect .git)"},
		{".git/commondir", "(--protect .git)"},
		{"vendor/lib/.git/config", ".git/config"},
		{"vendor/lib/.git/hooks/pre-commit", ".git/hooks/**"},
		{"src/.envrc", ".envrc"},
		{"build/out.sh", "build/**"},
		{"build/new.sh", "build/**"},
	} {
		s.wantPolicyAll(mutations(t, root, c.path), c.rule)
	}
	// The directories themselves, and those that hold protected paths.
	for _, d := range []struct{ path, rule string }{
		{".git/hooks", ".git/hooks/**"}, {".vscode", ".vscode/**"}, {"build", "build/**"}, {".git", "(--protect .git)"},
		{"vendor", "(--protect .git)"}, {"vendor/lib", "(--protect .git)"},
	} {
		s.wantPolicy("fs_delete", map[string]any{"path": d.path, "recursive": true}, d.rule)
		s.wantPolicy("fs_move", map[string]any{"from": d.path, "to": "elsewhere"}, d.rule)
	}
	// Making a protected directory, even as the parent of another, and
	// moving a tree to where it would become protected.
	s.wantPolicy("fs_mkdir", map[string]any{"path": "src/.idea"}, ".idea/**")
	s.wantPolicy("fs_mkdir", map[string]any{"path": "src/deep/.vscode/x"}, ".vscode/**")
	s.wantPolicy("fs_mkdir", map[string]any{"path": "src/deep/x/../../.vscode"}, ".vscode/**")
	s.wantPolicy("fs_move", map[string]any{"from": "tree", "to": "src/.git"}, "(--protect .git)")
	s.wantPolicy("fs_move", map[string]any{"from": "tree/hooks", "to": ".git/hooks2"}, "(--protect .git)")
	s.wantPolicy("fs_move", map[string]any{"from": "tree2", "to": "src/.vscode"}, ".vscode/**")
	s.wantPolicy("fs_move", map[string]any{"from": "tree", "to": "build"}, "build/**")
	sameSnapshot(t, "refused mutations", before, snapshot(t, root))
	// Reading stays allowed; so do mutations beside the protected paths.
	s.wantOK("fs_read", map[string]any{"path": ".git/config"})
	s.wantOK("fs_write", map[string]any{"path": "notes/hooks/pre-commit", "content": "fine\n", "if_sha256": sha([]byte("not a hook\n"))})
	s.wantOK("fs_mkdir", map[string]any{"path": "src/.github"})
	s.wantOK("fs_move", map[string]any{"from": "tree", "to": "tree3"})
	s.wantOK("fs_delete", map[string]any{"path": "tree3", "recursive": true})
}

// TestPolicyGitAttacks runs the two attacks of the hostile battery through
// fsmcp, then the host's own git commit and git status, which must run
// nothing planted. A control repository, planted by the host the same
// way, shows that the payloads do run when they get in.
func TestPolicyGitAttacks(t *testing.T) {
	markers := t.TempDir()
	hookRan, fsmRan := filepath.Join(markers, "hook-ran"), filepath.Join(markers, "fsmonitor-ran")
	hook := "#!/bin/sh\necho ran > " + hookRan + "\n"
	fsm := "echo ran > " + fsmRan + "\n"

	root := t.TempDir()
	git(t, root, "init", "-q")
	putFile(t, filepath.Join(root, "a.txt"), "a\n", 0o644)
	git(t, root, "add", "a.txt")
	git(t, root, "commit", "-q", "-m", "one")
	s := start(t, root)
	// Attack 1: the sample hook is already executable; moving it in
	// place and writing its content would run it at the next commit.
	sample := ".git/hooks/pre-commit.sample"
	s.wantPolicy("fs_move", map[string]any{"from": sample, "to": ".git/hooks/pre-commit"}, ".git/hooks/**")
	s.wantPolicy("fs_write", map[string]any{"path": ".git/hooks/pre-commit", "content": hook, "if_sha256": nil}, ".git/hooks/**")
	s.wantPolicy("fs_write", map[string]any{"path": sample, "content": hook,
		"if_sha256": sha(readFile(t, filepath.Join(root, sample)))}, ".git/hooks/**")
	// Attack 2: core.fsmonitor names a script the agent wrote.
	cfg := readFile(t, filepath.Join(root, ".git", "config"))
	s.wantPolicy("fs_replace", map[string]any{"path": ".git/config", "if_sha256": sha(cfg),
		"edits": []map[string]any{{"old": "[core]", "new": "[core]\n\tfsmonitor = sh fsm.sh"}}}, ".git/config")
	s.wantPolicy("fs_write", map[string]any{"path": ".git/fsm.sh", "content": fsm, "if_sha256": nil}, "(--protect .git)")
	s.wantOK("fs_write", map[string]any{"path": "fsm.sh", "content": fsm, "if_sha256": nil})
	s.wantOK("fs_write", map[string]any{"path": "b.txt", "content": "b\n", "if_sha256": nil})

	git(t, root, "add", "b.txt")
	git(t, root, "commit", "-q", "-m", "two")
	git(t, root, "status", "--porcelain")
	for _, m := range []string{hookRan, fsmRan} {
		if fileExists(m) {
			t.Fatalf("the host's git ran a planted program: %s exists", m)
		}
	}

	// The control: the same payloads, planted by the host, do run.
	ctl := t.TempDir()
	git(t, ctl, "init", "-q")
	putFile(t, filepath.Join(ctl, ".git", "hooks", "pre-commit"), hook, 0o755)
	putFile(t, filepath.Join(ctl, "fsm.sh"), fsm, 0o644)
	git(t, ctl, "config", "core.fsmonitor", "sh fsm.sh")
	putFile(t, filepath.Join(ctl, "a.txt"), "a\n", 0o644)
	git(t, ctl, "add", "a.txt")
	git(t, ctl, "commit", "-q", "-m", "one")
	git(t, ctl, "status", "--porcelain")
	for _, m := range []string{hookRan, fsmRan} {
		if !fileExists(m) {
			t.Fatalf("control: %s was not created: the payload would prove nothing", m)
		}
	}
}

// TestPolicySpellings: however the client spells a protected path, the
// policy judges the path it resolves to.
func TestPolicySpellings(t *testing.T) {
	root := policyTree(t)
	cfg := sha(readFile(t, filepath.Join(root, ".git", "config")))
	if err := os.Symlink(".git", filepath.Join(root, "dotgit")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("vendor/lib/.git/hooks", filepath.Join(root, "hooks")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	before := snapshot(t, root)
	for _, p := range []string{
		"src/../.git/config", "/.git/config", ".git//config", "./.git/./config",
		"src/../src/../.git/config", "dotgit/config", "vendor/lib/../../.git/config", ".git/hooks/../config",
	} {
		s.wantPolicy("fs_write", map[string]any{"path": p, "content": "x", "if_sha256": cfg}, ".git/config")
		s.wantPolicy("fs_replace", map[string]any{"path": p, "if_sha256": cfg, "edits": []map[string]any{{"old": "[", "new": "("}}}, ".git/config")
		s.wantPolicy("fs_delete", map[string]any{"path": p}, ".git/config")
	}
	// Two leading slashes make an absolute path, which the Root refuses
	// before any policy is asked.
	s.wantErr("fs_write", map[string]any{"path": "//.git/config", "content": "x", "if_sha256": cfg}, "outside_root")
	// A base64 twin, and a nested repository's hooks through a symlink.
	s.wantPolicy("fs_write", map[string]any{"path_base64": base64.StdEncoding.EncodeToString([]byte(".git/config")),
		"content": "x", "if_sha256": cfg}, ".git/config")
	s.wantPolicy("fs_write", map[string]any{"path": "hooks/pre-commit", "content": "x", "if_sha256": nil}, ".git/hooks/**")
	s.wantPolicy("fs_mkdir", map[string]any{"path": "dotgit/hooks/new"}, ".git/hooks/**")
	s.wantPolicy("fs_move", map[string]any{"from": "src/main.go", "to": "dotgit/info/attributes"}, ".git/info/**")
	sameSnapshot(t, "refused spellings", before, snapshot(t, root))

	// A parent renamed away and back, on the host: the judgement follows
	// the name the kernel gives now, never a remembered one.
	if err := os.Rename(filepath.Join(root, "vendor"), filepath.Join(root, "third_party")); err != nil {
		t.Fatal(err)
	}
	s.wantPolicy("fs_write", map[string]any{"path": "third_party/lib/.git/hooks/pre-push", "content": "x", "if_sha256": nil}, ".git/hooks/**")
	s.wantErr("fs_write", map[string]any{"path": "vendor/lib/.git/hooks/pre-push", "content": "x", "if_sha256": nil}, "not_found")
	if err := os.Rename(filepath.Join(root, "third_party"), filepath.Join(root, "vendor")); err != nil {
		t.Fatal(err)
	}
	s.wantPolicy("fs_write", map[string]any{"path": "vendor/lib/.git/hooks/pre-push", "content": "x", "if_sha256": nil}, ".git/hooks/**")
	s.wantPolicy("fs_move", map[string]any{"from": "vendor", "to": "third_party"}, "(--protect .git)")
	s.wantPolicy("fs_move", map[string]any{"from": "vendor/lib", "to": "lib"}, "(--protect .git)")
	sameSnapshot(t, "refused after renames", before, snapshot(t, root))
}

// TestPolicyDeny: denied paths keep their names in listings but give no
// content to any read or search tool, under any spelling.
func TestPolicyDeny(t *testing.T) {
	root := t.TempDir()
	putFile(t, filepath.Join(root, "secrets", "token"), "TOKEN-DENIED\n", 0o600)
	putFile(t, filepath.Join(root, "id.key"), "KEY-DENIED\n", 0o600)
	putFile(t, filepath.Join(root, "src", "nested", "other.key"), "NESTED-DENIED\n", 0o600)
	putFile(t, filepath.Join(root, "pub.txt"), "PUBLIC-TEXT\n", 0o644)
	if err := os.Symlink("secrets/token", filepath.Join(root, "tok")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("secrets", filepath.Join(root, "sec")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--deny", "/secrets", "--deny", "*.key")
	tokSHA := sha([]byte("TOKEN-DENIED\n"))
	for _, c := range []struct{ path, rule string }{
		{"secrets/token", "--deny /secrets"}, {"src/../secrets/token", "--deny /secrets"}, {"/secrets//token", "--deny /secrets"},
		{"tok", "--deny /secrets"}, {"sec/token", "--deny /secrets"}, {"id.key", "--deny *.key"}, {"src/nested/other.key", "--deny *.key"},
	} {
		s.wantPolicy("fs_read", map[string]any{"path": c.path}, c.rule)
		s.wantPolicy("fs_read", map[string]any{"path": c.path, "line": 1}, c.rule)
		s.wantPolicy("fs_grep", map[string]any{"pattern": "DENIED", "path": c.path}, c.rule)
	}
	s.wantPolicy("fs_read", map[string]any{"path_base64": base64.StdEncoding.EncodeToString([]byte("secrets/token"))}, "--deny /secrets")
	s.wantPolicy("fs_grep", map[string]any{"pattern": "DENIED", "path": "secrets"}, "--deny /secrets")
	s.wantPolicy("fs_grep", map[string]any{"pattern": "DENIED", "path": "sec"}, "--deny /secrets")
	// Tools that would hash or read the current content to change it.
	s.wantPolicy("fs_write", map[string]any{"path": "secrets/token", "content": "x", "if_sha256": tokSHA}, "--deny /secrets")
	s.wantPolicy("fs_write", map[string]any{"path": "id.key", "content": "x", "if_sha256": nil}, "--deny *.key")
	s.wantPolicy("fs_replace", map[string]any{"path": "id.key", "if_sha256": sha([]byte("KEY-DENIED\n")),
		"edits": []map[string]any{{"old": "KEY", "new": "K"}}}, "--deny *.key")
	// Tools added since that read or hash content.
	s.wantPolicy("fs_digest", map[string]any{"path": "id.key"}, "--deny *.key")
	s.wantPolicy("fs_digest", map[string]any{"path": "secrets"}, "--deny /secrets")
	s.wantPolicy("fs_copy", map[string]any{"from": "sec/token", "to": "copied"}, "--deny /secrets")
	s.wantPolicy("fs_copy", map[string]any{"from": "secrets", "to": "copied", "recursive": true}, "--deny /secrets")
	s.wantPolicy("fs_delete", map[string]any{"path": "secrets/token", "if_sha256": tokSHA}, "--deny /secrets")
	s.wantPolicy("fs_splice", map[string]any{"path": "id.key", "offset": 0, "insert": "x", "if_sha256": sha([]byte("KEY-DENIED\n"))}, "--deny *.key")
	if tr := s.wantOK("fs_tree", map[string]any{"path": ""}); !strings.Contains(tr.text, "token") || strings.Contains(tr.text, "DENIED") {
		t.Fatalf("fs_tree of a root with denied files: %s", tr.text)
	}
	// Moving denied content to where it would not be denied.
	s.wantPolicy("fs_move", map[string]any{"from": "id.key", "to": "id.txt"}, "--deny *.key")
	s.wantPolicy("fs_move", map[string]any{"from": "secrets", "to": "public"}, "--deny /secrets")
	// A tree whose denied files stay denied where it goes may move.
	s.wantOK("fs_move", map[string]any{"from": "src", "to": "src2"})
	s.wantOK("fs_move", map[string]any{"from": "src2", "to": "src"})

	// Names are still listed; stat describes without a hash.
	st := s.wantOK("fs_stat", map[string]any{"path": "secrets/token"})
	if _, has := st.doc["sha256"]; has || st.num("size") != int64(len("TOKEN-DENIED\n")) {
		t.Fatalf("fs_stat of a denied file: %s", st.text)
	}
	if st := s.wantOK("fs_stat", map[string]any{"path": "pub.txt"}); st.str("sha256") != sha([]byte("PUBLIC-TEXT\n")) {
		t.Fatalf("fs_stat of an allowed file has no sha256: %s", st.text)
	}
	if l := s.wantOK("fs_list", map[string]any{"path": "secrets"}); !strings.Contains(l.text, `"token"`) {
		t.Fatalf("fs_list does not list the denied name: %s", l.text)
	}
	if g := s.wantOK("fs_glob", map[string]any{"pattern": "**", "path": "", "hidden": true}); !strings.Contains(g.text, "secrets/token") ||
		!strings.Contains(g.text, "id.key") || !strings.Contains(g.text, "src/nested/other.key") {
		t.Fatalf("fs_glob does not list the denied names: %s", g.text)
	}
	// A search over everything finds the allowed match and none of the
	// denied ones, whatever globs the client adds.
	for _, args := range []map[string]any{
		{"pattern": "DENIED|PUBLIC", "path": ""},
		{"pattern": "DENIED|PUBLIC", "path": "", "glob": []string{"*.key", "secrets/**", "*.txt"}, "no_ignore": true, "hidden": true},
		{"pattern": "DENIED|PUBLIC", "path": "src"},
		{"pattern": "DENIED|PUBLIC", "path": "src/nested"},
	} {
		g := s.wantOK("fs_grep", args)
		if strings.Contains(g.text, "DENIED") {
			t.Fatalf("fs_grep(%v) returned denied content: %s", args, g.text)
		}
		if args["path"] == "" && !strings.Contains(g.text, "PUBLIC-TEXT") {
			t.Fatalf("fs_grep(%v) lost the allowed match: %s", args, g.text)
		}
	}
	// The attestation lists the policy.
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	pol, _ := r.doc["confinement"].(map[string]any)["policy"].(map[string]any)
	if deny, _ := pol["deny"].([]any); len(deny) != 2 || deny[0] != "/secrets" || deny[1] != "*.key" {
		t.Fatalf("confinement.policy: %s", r.text)
	}
}

// TestPolicyAttestation: fs_stat of the root lists the policy and the
// self-test, each probe refused by the kernel.
func TestPolicyAttestation(t *testing.T) {
	s := start(t, t.TempDir(), "--protect", "build/**", "--no-default-protect")
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	conf, _ := r.doc["confinement"].(map[string]any)
	pol, _ := conf["policy"].(map[string]any)
	if p, _ := pol["protect"].([]any); len(p) != 1 || p[0] != "build/**" {
		t.Fatalf("confinement.policy.protect: %s", r.text)
	}
	want := map[string]string{"open outside the root": "EACCES", "access-mode-3 open outside the root": "EPERM",
		"tcp socket": "EPERM", "exec of a program not granted": "EACCES"}
	probes, _ := conf["selftest"].([]any)
	if len(probes) != len(want) {
		t.Fatalf("confinement.selftest: %s", r.text)
	}
	for _, p := range probes {
		m := p.(map[string]any)
		if want[m["probe"].(string)] != m["result"] || m["refused"] != true {
			t.Errorf("probe %v, want refused with %s", m, want[m["probe"].(string)])
		}
	}
	def := start(t, t.TempDir())
	r = def.wantOK("fs_stat", map[string]any{"path": ""})
	pol, _ = r.doc["confinement"].(map[string]any)["policy"].(map[string]any)
	if p, _ := pol["protect"].([]any); len(p) != len(sandbox.DefaultProtect) || p[0] != ".git/hooks/**" || p[len(p)-1] != ".git" {
		t.Fatalf("default confinement.policy.protect: %s", r.text)
	}
}

// TestPolicySelftestFailure: a probe that the kernel allows (the test hook
// points the "outside" open at a file inside the root) ends start-up with
// one clear line, before any client is served.
func TestPolicySelftestFailure(t *testing.T) {
	root := t.TempDir()
	putFile(t, filepath.Join(root, selftestInside), "x", 0o644)
	s := spawn(t, root)
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(30 * time.Second); code == 0 {
		t.Fatalf("fsmcp started although a self-test probe succeeded\n%s", s.stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(l, "self-test") {
			lines = append(lines, l)
		}
	}
	want := "fsmcp worker: self-test failed, refusing to serve unconfined: the kernel allowed open outside the root: allowed"
	if len(lines) != 1 || lines[0] != want {
		t.Fatalf("stderr lines about the self-test %q, want [%q]\nstderr:\n%s", lines, want, s.stderr.String())
	}
}

// TestPolicyTempPrefixComponents: no mutation may create a name with the
// temp prefix, as any component.
func TestPolicyTempPrefixComponents(t *testing.T) {
	root := t.TempDir()
	putFile(t, filepath.Join(root, "f"), "f\n", 0o644)
	// One the host made (newer than the server's start, so the start-up
	// sweep of crash leftovers leaves it).
	if err := os.Mkdir(filepath.Join(root, ".fsmcp-tmp-old"), 0o755); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, ".fsmcp-tmp-old"), later, later); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	before := snapshot(t, root)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"fs_mkdir", map[string]any{"path": ".fsmcp-tmp-x/inner"}},
		{"fs_mkdir", map[string]any{"path": "a/.fsmcp-tmp-x"}},
		{"fs_mkdir", map[string]any{"path": "a/.fsmcp-tmp-x/b/c"}},
		{"fs_mkdir", map[string]any{"path": ".fsmcp-tmp-old/inner"}},
		{"fs_move", map[string]any{"from": "f", "to": ".fsmcp-tmp-x"}},
		{"fs_move", map[string]any{"from": "f", "to": ".fsmcp-tmp-old/f"}},
		{"fs_write", map[string]any{"path": ".fsmcp-tmp-old/g", "content": "g", "if_sha256": nil}},
		{"fs_write", map[string]any{"path": ".fsmcp-tmp-y", "content": "g", "if_sha256": nil}},
	} {
		r := s.wantErr(c.tool, c.args, "invalid_argument")
		if !strings.Contains(r.text, "reserved for fsmcp's temp files") {
			t.Fatalf("%s(%v) = %s, want the temp-name refusal", c.tool, c.args, r.text)
		}
	}
	sameSnapshot(t, "temp-prefix refusals", before, snapshot(t, root))
}

// TestPolicyAuditRecordsViolation: the audit line of a refused call says
// so.
func TestPolicyAuditRecordsViolation(t *testing.T) {
	root := policyTree(t)
	log := filepath.Join(t.TempDir(), "audit.log")
	s := start(t, root, "--audit-log", log)
	s.wantPolicy("fs_delete", map[string]any{"path": ".envrc"}, ".envrc")
	s.wantOK("fs_stat", map[string]any{"path": ".envrc"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) >= 2 {
			var refused, ok map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &refused); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(lines[1]), &ok); err != nil {
				t.Fatal(err)
			}
			if refused["policy_violation"] != true || refused["outcome"] != "permission_denied" {
				t.Fatalf("audit line of a refusal: %s", lines[0])
			}
			if _, has := ok["policy_violation"]; has {
				t.Fatalf("audit line of an allowed call: %s", lines[1])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPolicyFlagRefusals: a glob the policy cannot use stops start-up
// with a message naming the flag.
func TestPolicyFlagRefusals(t *testing.T) {
	root := t.TempDir()
	for _, args := range [][]string{
		{"--protect", ""}, {"--protect", "build/"}, {"--deny", "a/../b"}, {"--deny", "[unclosed"}, {"--protect", "//x"},
	} {
		cmd := fsmcpCommand(root, args...)
		var stdout, stderr syncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("fsmcp %v started; want a refusal", args)
		}
		if want := args[0] + " " + strconv.Quote(args[1]); !strings.Contains(stderr.String(), want) {
			t.Errorf("fsmcp %v: stderr %q, want it to name %s", args, stderr.String(), want)
		}
	}
}

// TestPolicyContentChangeDropsPrivileges: new content from the agent does
// not keep what would let it run with privileges: setuid, setgid on a
// group-executable file, file capabilities. Everything else stays.
func TestPolicyContentChangeDropsPrivileges(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "tool")
	putFile(t, p, "old", 0o644)
	if err := os.Chmod(p, 0o6755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(p, "user.keep", []byte("kept"), 0); err != nil {
		t.Skipf("the test directory's filesystem has no user xattrs: %v", err)
	}
	// struct vfs_cap_data, revision 2, effective: CAP_NET_BIND_SERVICE.
	capData := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if err := unix.Setxattr(p, "security.capability", capData, 0); err != nil {
		t.Skipf("cannot set a file capability here (needs CAP_SETFCAP): %v", err)
	}
	// chmod after setxattr: setting the capability does not clear the
	// bits, but keep the order the host would use.
	if err := os.Chmod(p, 0o6755); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	s.wantOK("fs_write", map[string]any{"path": "tool", "content": "new", "if_sha256": sha([]byte("old"))})
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o755 {
		t.Errorf("mode after fs_write %04o, want 0755 (setuid and setgid dropped)", st.Mode&0o7777)
	}
	buf := make([]byte, 64)
	if _, err := unix.Getxattr(p, "security.capability", buf); err == nil {
		t.Errorf("security.capability survived the write")
	}
	if n, err := unix.Getxattr(p, "user.keep", buf); err != nil || string(buf[:n]) != "kept" {
		t.Errorf("user.keep after the write: %q, %v", buf[:max(n, 0)], err)
	}
	// fs_replace too, on a setgid file that is not group-executable: its
	// setgid bit is a locking mark and stays.
	if err := unix.Chmod(p, 0o6745); err != nil {
		t.Fatal(err)
	}
	s.wantOK("fs_replace", map[string]any{"path": "tool", "if_sha256": sha([]byte("new")), "edits": []map[string]any{{"old": "new", "new": "newer"}}})
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o2745 {
		t.Errorf("mode after fs_replace %04o, want 2745 (setuid dropped, setgid kept without group execute)", st.Mode&0o7777)
	}
}

// TestPolicyHardLinks: another name of a protected or denied file, once
// the policy has seen the file, is judged like it.
func TestPolicyHardLinks(t *testing.T) {
	root := policyTree(t)
	putFile(t, filepath.Join(root, "secrets", "token"), "TOKEN-DENIED\n", 0o600)
	putFile(t, filepath.Join(root, "pub", "readme"), "PUBLIC-TEXT\n", 0o644)
	for old, twin := range map[string]string{".git/config": "notes/cfg", "secrets/token": "pub/leak"} {
		if err := os.Link(filepath.Join(root, old), filepath.Join(root, twin)); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, root, "--deny", "/secrets")
	cfg := sha(readFile(t, filepath.Join(root, ".git", "config")))
	// Seen by a listing and by a stat.
	s.wantOK("fs_list", map[string]any{"path": ".git"})
	s.wantOK("fs_stat", map[string]any{"path": "secrets/token"})
	s.wantPolicy("fs_write", map[string]any{"path": "notes/cfg", "content": "x", "if_sha256": cfg}, "hard link of \".git/config\"")
	s.wantPolicy("fs_delete", map[string]any{"path": "notes/cfg"}, "--protect .git/config")
	s.wantPolicy("fs_read", map[string]any{"path": "pub/leak"}, "hard link of \"secrets/token\"")
	g := s.wantOK("fs_grep", map[string]any{"pattern": "DENIED|PUBLIC", "path": ""})
	if strings.Contains(g.text, "DENIED") || !strings.Contains(g.text, "PUBLIC-TEXT") {
		t.Fatalf("fs_grep over a hard link of a denied file: %s", g.text)
	}
	g = s.wantOK("fs_grep", map[string]any{"pattern": "DENIED|PUBLIC", "path": "pub"})
	if strings.Contains(g.text, "DENIED") {
		t.Fatalf("fs_grep in the hard link's directory: %s", g.text)
	}
}
