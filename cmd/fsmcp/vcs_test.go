package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostileRepo makes a git repository beneath root whose own configuration
// names a program for every key that can run one, with hooks and a
// .gitattributes filter and diff driver. Each program, if it ever ran,
// would leave a marker file in the returned directory (outside the root
// and /tmp).
func hostileRepo(t *testing.T, root string) (repo, markers string) {
	t.Helper()
	markers, err := os.MkdirTemp("/var/tmp", "fsmcp-vcs-markers-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(markers) })
	hook := filepath.Join(markers, "hook.sh")
	// It also behaves enough like each program for git to carry on.
	script := "#!/bin/sh\ntouch " + markers + "/ran-$1\ncase $1 in clean|smudge|textconv) cat;; esac\nexit 0\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	repo = filepath.Join(root, "repo")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+markers, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\ntwo\n")
	write("f.dat", "data\n")
	write("old name.txt", "moved\n")
	write("plain.md", "plain\n")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	write("b.txt", "new\n")
	git("mv", "old name.txt", "new name.txt")
	git("add", "b.txt")
	// The hostile part comes after the last git command of the set-up,
	// which would run it.
	for _, kv := range [][2]string{
		{"core.fsmonitor", hook + " fsmonitor"},
		{"core.hooksPath", filepath.Join(markers, "hooks")},
		{"core.pager", hook + " pager"},
		{"pager.status", hook + " pager-status"},
		{"pager.diff", hook + " pager-diff"},
		{"core.sshCommand", hook + " ssh"},
		{"core.askPass", hook + " askpass"},
		{"credential.helper", hook + " credential"},
		{"gpg.program", hook + " gpg"},
		{"diff.external", hook + " external"},
		{"filter.evil.clean", hook + " clean"},
		{"filter.evil.smudge", hook + " smudge"},
		{"filter.evil.required", "true"},
		{"filter.ev=il.clean", hook + " clean-eq"},
		{"diff.evil.textconv", hook + " textconv"},
		{"diff.evil.command", hook + " diffcmd"},
	} {
		git("config", kv[0], kv[1])
	}
	if err := os.MkdirAll(filepath.Join(markers, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"post-index-change", "pre-commit", "post-checkout", "reference-transaction"} {
		for _, dir := range []string{filepath.Join(markers, "hooks"), filepath.Join(repo, ".git", "hooks")} {
			if err := os.WriteFile(filepath.Join(dir, h), []byte("#!/bin/sh\ntouch "+markers+"/ran-hook-"+h+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(".gitattributes", "*.dat filter=evil diff=evil\n*.txt diff=evil\n")
	write("a.txt", "one\nTWO\n")
	write("f.dat", "changed data\n")
	write("untracked file.txt", "u\n")
	write("plain.md", "changed plain\n")
	if m := ranMarkers(t, markers); len(m) != 0 {
		t.Fatalf("the set-up ran %v", m)
	}
	return repo, markers
}

func ranMarkers(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "ran-*"))
	return m
}

// Status and diff work on a repository whose configuration, hooks and
// attributes name a program everywhere one can be named, and none of them
// runs. The control (the host's git, unconfined, on the same repository)
// shows that they would.
func TestVcsHostileRepository(t *testing.T) {
	root := t.TempDir()
	repo, markers := hostileRepo(t, root)
	s := start(t, root, "--vcs", "git")

	st := s.wantOK("fs_vcs_status", map[string]any{"backend": "git", "path": "repo"})
	if st.num("exit") != 0 || st.str("stderr") != "" {
		t.Errorf("status: %s", st.text)
	}
	branch, _ := st.doc["branch"].(map[string]any)
	if branch["head"] != "main" || len(branch["oid"].(string)) != 40 {
		t.Errorf("branch %v", branch)
	}
	got := map[string]string{}
	for _, e := range st.doc["entries"].([]any) {
		m := e.(map[string]any)
		desc := m["kind"].(string)
		if xy, ok := m["xy"].(string); ok {
			desc += " " + xy
		}
		if o, ok := m["orig_path"]; ok {
			desc += " from " + o.(string)
		}
		got[m["path"].(string)] = strings.TrimSpace(desc)
	}
	want := map[string]string{"a.txt": "changed .M", "plain.md": "changed .M", "f.dat": "changed .M", "b.txt": "changed A.",
		"new name.txt": "renamed R. from old name.txt", "untracked file.txt": "untracked", ".gitattributes": "untracked"}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("status of %q = %q, want %q (all: %v)", p, got[p], w, got)
		}
	}

	d := s.wantOK("fs_vcs_diff", map[string]any{"backend": "git", "path": "repo"})
	diff := d.str("diff")
	if d.str("diff_encoding") != "utf8" || !strings.Contains(diff, "-two\n+TWO\n") || !strings.Contains(diff, "+changed data\n") ||
		!strings.Contains(diff, "+changed plain\n") ||
		d.str("stderr") != "" {
		t.Errorf("diff: %s", d.text)
	}
	staged := s.wantOK("fs_vcs_diff", map[string]any{"backend": "git", "path": "repo", "staged": true, "files": []string{"b.txt"}})
	if sd := staged.str("diff"); !strings.Contains(sd, "+new\n") || strings.Contains(sd, "a.txt") {
		t.Errorf("staged diff of b.txt: %s", staged.text)
	}
	if m := ranMarkers(t, markers); len(m) != 0 {
		t.Fatalf("programs ran under fs_vcs: %v", m)
	}

	// Control: the host's git runs the repository's programs.
	for _, args := range [][]string{{"status"}, {"diff"}} {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+markers)
		_ = cmd.Run()
	}
	ran := strings.Join(ranMarkers(t, markers), " ")
	for _, w := range []string{"ran-fsmonitor", "ran-clean", "ran-smudge", "ran-external", "ran-diffcmd", "ran-hook-post-index-change"} {
		if !strings.Contains(ran, w) {
			t.Errorf("control: %s did not run (%s): the repository is not as hostile as the test thinks", w, ran)
		}
	}
}

// The version-control tools refuse what they cannot serve.
func TestVcsRefusals(t *testing.T) {
	root := t.TempDir()
	hostileRepo(t, root)
	if err := os.Symlink("/etc", filepath.Join(root, "abs")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--vcs", "git")
	for _, c := range []struct {
		args map[string]any
		code string
	}{
		{map[string]any{"backend": "hg", "path": "repo"}, "invalid_argument"},
		{map[string]any{"backend": "git", "path": ".."}, "outside_root"},
		{map[string]any{"backend": "git", "path": "abs"}, "outside_root"},
		{map[string]any{"backend": "git", "path": "repo", "files": []string{"../x"}}, "invalid_argument"},
		{map[string]any{"backend": "git", "path": "repo", "files": []string{"/etc/passwd"}}, "invalid_argument"},
	} {
		s.wantErr("fs_vcs_status", c.args, c.code)
		s.wantErr("fs_vcs_diff", c.args, c.code)
	}
	// Outside a repository, git's own failure is the result; path left
	// out is the root, as "" names it.
	for _, args := range []map[string]any{{"backend": "git", "path": ""}, {"backend": "git"}} {
		r := s.wantOK("fs_vcs_status", args)
		if r.num("exit") == 0 || !strings.Contains(r.str("stderr"), "not a git repository") {
			t.Errorf("status %v outside a repository: %s", args, r.text)
		}
	}
	// A file name is literal, never a pathspec's magic.
	r := s.wantOK("fs_vcs_status", map[string]any{"backend": "git", "path": "repo", "files": []string{":(top)a.txt"}})
	if n := len(r.doc["entries"].([]any)); n != 0 {
		t.Errorf("a magic pathspec matched %d entries: %s", n, r.text)
	}
}

// The kernel alone stops the repository's programs: git granted to fs_exec
// and run without fs_vcs's configuration (env drops it) tries to run them,
// and every attempt is refused (the programs lie outside every grant, and
// the shell that would run a command string is not granted either).
func TestVcsKernelAloneRefusesRepositoryPrograms(t *testing.T) {
	root := t.TempDir()
	_, markers := hostileRepo(t, root)
	s := start(t, root, "--exec", "/usr/bin/git", "--exec", "/usr/bin/env")
	for _, args := range [][]string{{"status"}, {"diff"}, {"diff", "--cached"}} {
		argv := append([]string{"env", "-u", "GIT_CONFIG_COUNT", "git", "-c", "safe.directory=*"}, args...)
		r := s.execCall(map[string]any{"argv": argv, "cwd": "repo"})
		if !strings.Contains(r.str("stderr"), "cannot run") && !strings.Contains(r.str("stderr"), "Permission denied") &&
			!strings.Contains(r.str("stderr"), "cannot fork") {
			t.Errorf("git %q: no refused program in %s", args, r.text)
		}
	}
	if m := ranMarkers(t, markers); len(m) != 0 {
		t.Fatalf("programs ran under the confinement alone: %v", m)
	}
}
