package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool skips a test whose tool is not installed (scripts/test.sh
// installs mercurial and subversion).
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed (apt-get install mercurial subversion)", name)
	}
}

// vcsEntries maps each status entry's path to "kind xy [from orig]".
func vcsEntries(t *testing.T, r reply) map[string]string {
	t.Helper()
	got := map[string]string{}
	es, ok := r.doc["entries"].([]any)
	if !ok {
		t.Fatalf("no entries in %s", r.text)
	}
	for _, e := range es {
		m := e.(map[string]any)
		desc := m["kind"].(string)
		if xy, ok := m["xy"].(string); ok {
			desc += " " + xy
		}
		if o, ok := m["orig_path"]; ok {
			desc += " from " + o.(string)
		}
		got[m["path"].(string)] = desc
	}
	return got
}

// run runs a set-up command and fails on error.
func runSetup(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
}

// hostileHgRepo makes a Mercurial repository beneath root whose .hg/hgrc
// loads an extension kept inside the repository (readable in the
// confinement, so only the configuration layer can stop it), defines
// Python and shell hooks, an alias that replaces status with a shell
// command, [defaults] that change diff, and a pager. Whatever runs writes
// a marker in the returned directory (outside the root and /tmp) and says
// RAN on stderr.
func hostileHgRepo(t *testing.T, root string) (repo, markers string) {
	t.Helper()
	markers, err := os.MkdirTemp("/var/tmp", "fsmcp-hg-markers-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(markers) })
	repo = filepath.Join(root, "repo")
	env := []string{"HGRCPATH=/dev/null", "HGUSER=t", "HGPLAIN=1"}
	runSetup(t, root, env, "hg", "init", "repo")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\ntwo\n")
	write("old name.txt", "moved\n")
	write("gone.txt", "gone\n")
	write("at@sign.txt", "at\n")
	runSetup(t, repo, env, "hg", "add", "a.txt", "old name.txt", "gone.txt", "at@sign.txt")
	runSetup(t, repo, env, "hg", "commit", "-m", "first")
	write("a.txt", "one\nTWO\n")
	write("b.txt", "new\n")
	write("untracked file.txt", "u\n")
	runSetup(t, repo, env, "hg", "add", "b.txt")
	runSetup(t, repo, env, "hg", "mv", "old name.txt", "new name.txt")
	runSetup(t, repo, env, "hg", "rm", "gone.txt")
	ext := `import os, sys
def mark(what):
    sys.stderr.write("RAN " + what + "\n")
    try:
        open(os.path.join("` + markers + `", "ran-" + what), "w").close()
    except OSError:
        pass
mark("extension-import")
def uisetup(ui):
    mark("extension-uisetup")
def hook(ui, repo, **kwargs):
    mark("python-hook")
`
	write(".hg/evil.py", ext)
	touch := "touch " + markers + "/ran-"
	// Each Python file is named twice: as the host sees it (for the
	// control) and as commands see the root (/tmp/root), where a client
	// that learnt its working directory from fs_exec would name it.
	host, confined := filepath.Join(repo, ".hg/evil.py"), "/tmp/root/repo/.hg/evil.py"
	hgrc := "[extensions]\nevil = " + host + "\nevilconfined = " + confined + "\n" +
		"[hooks]\npre-status = python:" + host + ":hook\npre-status.confined = python:" + confined + ":hook\n" +
		"pre-status.shell = " + touch + "shell-hook\npre-diff = " + touch + "diff-hook\n" +
		"[alias]\nstatus = !" + touch + "alias\n" +
		"[defaults]\ndiff = --stat\n" +
		"[pager]\npager = " + touch + "pager; cat\n[ui]\npaginate = always\n"
	write(".hg/hgrc", hgrc)
	return repo, markers
}

// fs_vcs_status and fs_vcs_diff work on a hostile Mercurial repository and
// nothing of its configuration runs, not even what Python would read and
// run in-process; the host's hg on the same repository runs it (control).
func TestVcsHgHostileRepository(t *testing.T) {
	needTool(t, "hg")
	root := t.TempDir()
	repo, markers := hostileHgRepo(t, root)
	s := start(t, root, "--vcs", "hg")

	st := s.wantOK("fs_vcs_status", map[string]any{"backend": "hg", "path": "repo"})
	if st.num("exit") != 0 || st.str("stderr") != "" || st.str("backend") != "hg" {
		t.Errorf("status: %s", st.text)
	}
	got := vcsEntries(t, st)
	want := map[string]string{"a.txt": "changed M", "b.txt": "changed A", "gone.txt": "changed R",
		"new name.txt": "renamed A from old name.txt", "untracked file.txt": "untracked ?"}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("status of %q = %q, want %q (all: %v)", p, got[p], w, got)
		}
	}
	if _, ok := got["old name.txt"]; ok || len(got) != len(want) {
		t.Errorf("status entries %v, want exactly %v", got, want)
	}
	d := s.wantOK("fs_vcs_diff", map[string]any{"backend": "hg", "path": "repo"})
	if diff := d.str("diff"); !strings.Contains(diff, "-two\n+TWO\n") || !strings.Contains(diff, "rename from old name.txt") ||
		!strings.Contains(diff, "+new\n") || d.str("stderr") != "" {
		t.Errorf("diff: %s", d.text)
	}
	// Files are literal names relative to path: a glob and a fileset
	// match nothing, a name with pattern syntax only itself.
	one := s.wantOK("fs_vcs_diff", map[string]any{"backend": "hg", "path": "repo", "files": []string{"a.txt"}})
	if diff := one.str("diff"); !strings.Contains(diff, "+TWO") || strings.Contains(diff, "b.txt") {
		t.Errorf("diff of a.txt: %s", one.text)
	}
	for _, f := range []string{"*.txt", "set:added()", "glob:*"} {
		r := s.wantOK("fs_vcs_status", map[string]any{"backend": "hg", "path": "repo", "files": []string{f}})
		if n := len(r.doc["entries"].([]any)); n != 0 {
			t.Errorf("files %q matched %d entries: %s", f, n, r.text)
		}
	}
	if m := ranMarkers(t, markers); len(m) != 0 {
		t.Fatalf("the repository's configuration ran under fs_vcs: %v", m)
	}
	for _, r := range []reply{st, d, one} {
		if strings.Contains(r.text, "RAN") {
			t.Errorf("the extension ran: %s", r.text)
		}
	}

	// Control: the host's hg, without the hardening, loads the extension
	// and runs the hooks and the alias.
	// The hook named by its confined path would abort the host's hg first.
	for _, args := range [][]string{{"status"}, {"diff"}} {
		cmd := exec.Command("hg", append([]string{"--config", "hooks.pre-status.confined="}, args...)...)
		cmd.Dir, cmd.Env = repo, append(os.Environ(), "HGRCPATH=/dev/null")
		_ = cmd.Run()
	}
	ran := strings.Join(ranMarkers(t, markers), " ")
	for _, w := range []string{"ran-extension-import", "ran-extension-uisetup", "ran-alias", "ran-diff-hook"} {
		if !strings.Contains(ran, w) {
			t.Errorf("control: %s did not run (%s): the repository is not as hostile as the test thinks", w, ran)
		}
	}
}

// hg's interpreter and library directories are granted and attested; a
// staged diff is git's alone; outside a repository hg's own failure is the
// result.
func TestVcsHgGrantsAndRefusals(t *testing.T) {
	needTool(t, "hg")
	root := t.TempDir()
	s := start(t, root, "--vcs", "hg")
	c := s.wantOK("fs_stat", map[string]any{"path": ""}).doc["confinement"].(map[string]any)["exec"].(map[string]any)
	files, dirs := fmt.Sprint(c["vcs_exec_files"]), fmt.Sprint(c["vcs_read_dirs"])
	if !strings.Contains(files, "/usr/bin/python3") || !strings.Contains(files, "/usr/bin/hg") ||
		!strings.Contains(dirs, "/usr/lib/python3/dist-packages") || !strings.Contains(fmt.Sprint(c["vcs"]), "hg Mercurial") {
		t.Errorf("attested vcs_exec_files %s, vcs_read_dirs %s, vcs %v", files, dirs, c["vcs"])
	}
	if fmt.Sprint(c["read_dirs"]) != "[]" {
		t.Errorf("hg's directories leaked into fs_exec's read_dirs: %v", c["read_dirs"])
	}
	s.wantErr("fs_vcs_diff", map[string]any{"backend": "hg", "path": "", "staged": true}, "invalid_argument")
	s.wantErr("fs_vcs_status", map[string]any{"backend": "git", "path": ""}, "invalid_argument")
	r := s.wantOK("fs_vcs_status", map[string]any{"backend": "hg", "path": ""})
	if r.num("exit") == 0 || !strings.Contains(r.str("stderr"), "no repository found") {
		t.Errorf("status outside a repository: %s", r.text)
	}
}

// What the kernel alone does against a hostile Mercurial repository: hg
// granted to fs_exec (its interpreter, the script's and the libraries'
// directories), run without any of fs_vcs's hardening. The shell alias
// and hooks cannot start a shell, and nothing reaches the marker directory;
// but the extension, Python that hg reads and runs in-process, does run:
// for hg, the configuration layer (HGRCSKIPREPO) is the one that stops it,
// which TestVcsHgHostileRepository shows.
func TestVcsHgKernelAlone(t *testing.T) {
	needTool(t, "hg")
	root := t.TempDir()
	_, markers := hostileHgRepo(t, root)
	python, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--exec", python, "--exec-read", "/usr/bin", "--exec-read", "/usr/lib/python3",
		"--exec-read", "/usr/lib/python3.11", "--exec-read", "/etc")
	hg := func(args ...string) reply {
		t.Helper()
		return s.execCall(map[string]any{"argv": append([]string{filepath.Base(python), "-I", "-B", "/usr/bin/hg"}, args...), "cwd": "repo"})
	}
	// The alias replaces status with a shell command: no shell can start.
	if r := hg("status"); !strings.Contains(r.str("stderr"), "RAN extension-import") {
		t.Errorf("status: the extension did not run in-process, so this test shows nothing: %s", r.text)
	}
	// diff runs its shell hook first: no shell can start either.
	if r := hg("diff"); !strings.Contains(r.str("stderr"), "Permission denied: '/bin/sh'") {
		t.Errorf("diff: the shell hook was not refused by the kernel: %s", r.text)
	}
	if m := ranMarkers(t, markers); len(m) != 0 {
		t.Fatalf("programs ran under the confinement alone: %v", m)
	}
}
