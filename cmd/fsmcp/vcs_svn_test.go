package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// svnWorkingCopy checks out, beneath root, a Subversion repository kept
// outside it, with changes of every kind, and an svn:externals property
// naming a second repository (a file:// URL outside the root) whose
// checked-out external copy has a change of its own.
func svnWorkingCopy(t *testing.T, root string) (wc string) {
	t.Helper()
	repos, err := os.MkdirTemp("/var/tmp", "fsmcp-svn-repos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(repos) })
	home := filepath.Join(repos, "home")
	env := []string{"HOME=" + home}
	runSetup(t, repos, env, "svnadmin", "create", "main")
	runSetup(t, repos, env, "svnadmin", "create", "other")
	wc = filepath.Join(root, "wc")
	other := filepath.Join(repos, "otherwc")
	runSetup(t, repos, env, "svn", "checkout", "-q", "file://"+filepath.Join(repos, "other"), other)
	if err := os.WriteFile(filepath.Join(other, "secret.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runSetup(t, other, env, "svn", "add", "-q", "secret.txt")
	runSetup(t, other, env, "svn", "commit", "-q", "-m", "x")
	runSetup(t, root, env, "svn", "checkout", "-q", "file://"+filepath.Join(repos, "main"), wc)
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(wc, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\ntwo\n")
	write("old name.txt", "moved\n")
	write("gone.txt", "gone\n")
	write("at@sign.txt", "at\n")
	write("props.txt", "p\n")
	runSetup(t, wc, env, "svn", "add", "-q", "a.txt", "old name.txt", "gone.txt", "at@sign.txt@", "props.txt")
	runSetup(t, wc, env, "svn", "propset", "-q", "svn:externals", "ext file://"+filepath.Join(repos, "other"), ".")
	runSetup(t, wc, env, "svn", "commit", "-q", "-m", "first")
	runSetup(t, wc, env, "svn", "update", "-q")
	write("a.txt", "one\nTWO\n")
	write("at@sign.txt", "AT\n")
	write("b.txt", "new\n")
	write("untracked file.txt", "u\n")
	if err := os.WriteFile(filepath.Join(wc, "ext", "secret.txt"), []byte("changed outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runSetup(t, wc, env, "svn", "add", "-q", "b.txt")
	runSetup(t, wc, env, "svn", "move", "-q", "old name.txt", "new name.txt")
	runSetup(t, wc, env, "svn", "rm", "-q", "gone.txt")
	runSetup(t, wc, env, "svn", "propset", "-q", "colour", "blue", "props.txt")
	return wc
}

// fs_vcs_status parses svn status --xml in git's shape and fs_vcs_diff
// returns svn's own diff; the external is neither reported nor diffed, a
// name with "@" is a name, and outside a working copy svn's failure is
// the result.
func TestVcsSvnStatusAndDiff(t *testing.T) {
	needTool(t, "svn")
	root := t.TempDir()
	svnWorkingCopy(t, root)
	s := start(t, root, "--vcs", "svn")
	st := s.wantOK("fs_vcs_status", map[string]any{"backend": "svn", "path": "wc"})
	if st.num("exit") != 0 || st.str("stderr") != "" {
		t.Errorf("status: %s", st.text)
	}
	got := vcsEntries(t, st)
	want := map[string]string{"a.txt": "changed M.", "at@sign.txt": "changed M.", "b.txt": "changed A.",
		"gone.txt": "changed D.", "props.txt": "changed .M", "new name.txt": "renamed A. from old name.txt",
		"untracked file.txt": "untracked ?."}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("status of %q = %q, want %q (all: %v)", p, got[p], w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("status entries %v, want exactly %v (no external, no separate source of the move)", got, want)
	}
	d := s.wantOK("fs_vcs_diff", map[string]any{"backend": "svn", "path": "wc"})
	diff := d.str("diff")
	if !strings.Contains(diff, "-two\n+TWO\n") || !strings.Contains(diff, "+AT\n") || !strings.Contains(diff, "+new\n") ||
		!strings.Contains(diff, "colour") || d.str("stderr") != "" {
		t.Errorf("diff: %s", d.text)
	}
	if strings.Contains(diff, "outside") {
		t.Errorf("the diff reached the external: %s", d.text)
	}
	for _, tool := range []string{"fs_vcs_diff", "fs_vcs_status"} {
		one := s.wantOK(tool, map[string]any{"backend": "svn", "path": "wc", "files": []string{"at@sign.txt"}})
		if !strings.Contains(one.text, "at@sign.txt") || strings.Contains(one.text, "a.txt") || one.str("stderr") != "" {
			t.Errorf("%s of at@sign.txt: %s", tool, one.text)
		}
	}
	s.wantErr("fs_vcs_diff", map[string]any{"backend": "svn", "path": "wc", "staged": true}, "invalid_argument")
	r := s.wantOK("fs_vcs_status", map[string]any{"backend": "svn", "path": ""})
	if !strings.Contains(r.str("stderr"), "is not a working copy") || len(r.doc["entries"].([]any)) != 0 {
		t.Errorf("status outside a working copy: %s", r.text)
	}
}

// --vcs hg and --vcs svn each bring the two version-control tools and
// nothing else; an unknown or repeated backend is refused at start-up.
func TestVcsHgSvnToolsAndFlags(t *testing.T) {
	needTool(t, "hg")
	needTool(t, "svn")
	root := t.TempDir()
	for _, b := range []string{"hg", "svn"} {
		got := listTools(t, start(t, root, "--vcs", b))
		for name, want := range map[string]bool{"fs_exec": false, "fs_vcs_status": true, "fs_vcs_diff": true} {
			if _, ok := got[name]; ok != want {
				t.Errorf("--vcs %s: %s listed = %v, want %v", b, name, ok, want)
			}
		}
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--vcs", "cvs"}, "want git, hg or svn"},
		{[]string{"--vcs", "hg", "--vcs", "hg"}, "hg given twice"},
	} {
		out, err := fsmcpCommand(root, c.flags...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("flags %q: err %v, output %q, want %q", c.flags, err, out, c.want)
		}
	}
}
