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

// Under --deny secret.txt, and alike under the rules line "deny *
// secret.txt", an hg or svn diff shows neither the stored nor the new
// content of the changed secret.txt, nor the stored content of the
// removed directory sub (read from .hg or .svn, which Landlock does not
// deny), names them on stderr, and still shows the change of another
// file (also when the files are named); a diff of secret.txt alone is
// empty (never the whole repository's). A copy of secret.txt is never
// shown as a diff against the secret's stored content: hg leaves it out,
// svn shows it as added. An added directory's file shows once; svn's
// other changes (a name with "@", a property, a deletion) show. Through a
// symlink to the repository, a glob naming its real path still applies.
// Without a policy, the control shows the secrets.
func TestVcsHgSvnDiffDenied(t *testing.T) {
	const stored, changed, removed = "stored secret\n", "new secret value\n", "removed secret\n"
	files := map[string]string{"secret.txt": stored, "other.txt": "other old\n", "sub/secret.txt": removed}
	setup := map[string]func(t *testing.T, root string) string{
		"hg": func(t *testing.T, root string) string {
			repo := filepath.Join(root, "repo")
			env := []string{"HGRCPATH=/dev/null", "HGUSER=t"}
			runSetup(t, root, env, "hg", "init", repo)
			writeTree(t, repo, files)
			runSetup(t, repo, env, "hg", "commit", "-q", "-A", "-m", "first")
			runSetup(t, repo, env, "hg", "rm", "-q", "sub")
			runSetup(t, repo, env, "hg", "cp", "-q", "secret.txt", "copy.txt")
			writeTree(t, repo, map[string]string{"newdir/a.txt": "in new dir\n"})
			runSetup(t, repo, env, "hg", "add", "-q", "newdir")
			return "repo"
		},
		"svn": func(t *testing.T, root string) string {
			wc := svnWorkingCopy(t, root)
			env := []string{"HOME=" + t.TempDir()}
			writeTree(t, wc, files)
			runSetup(t, wc, env, "svn", "add", "-q", "secret.txt", "other.txt", "sub")
			runSetup(t, wc, env, "svn", "commit", "-q", "-m", "secret", "secret.txt", "other.txt", "sub")
			runSetup(t, wc, env, "svn", "rm", "-q", "sub")
			runSetup(t, wc, env, "svn", "cp", "-q", "secret.txt", "copy.txt")
			writeTree(t, wc, map[string]string{"newdir/a.txt": "in new dir\n"})
			runSetup(t, wc, env, "svn", "add", "-q", "newdir")
			return "wc"
		},
	}
	for _, backend := range []string{"hg", "svn"} {
		t.Run(backend, func(t *testing.T) {
			needTool(t, backend)
			root := t.TempDir()
			dir := setup[backend](t, root)
			writeTree(t, filepath.Join(root, dir), map[string]string{"secret.txt": changed, "other.txt": "other new\n", "copy.txt": "copy\n"})
			args := map[string]any{"backend": backend, "path": dir}
			control := start(t, root, "--vcs", backend).wantOK("fs_vcs_diff", args)
			if !strings.Contains(control.str("diff"), "-"+stored) || !strings.Contains(control.str("diff"), "+"+changed) ||
				!strings.Contains(control.str("diff"), "-"+removed) || !strings.Contains(control.str("diff"), "+copy\n") {
				t.Fatalf("without a policy, the diff lacks the secret's change: %s", control.text)
			}
			for name, flags := range map[string][]string{
				"--deny":  {"--deny", "secret.txt"},
				"--rules": {"--rules", rulesFile(t, root, "deny * secret.txt\n")},
			} {
				s := start(t, root, append([]string{"--vcs", backend}, flags...)...)
				d := s.wantOK("fs_vcs_diff", args)
				if strings.Contains(d.text, "secret value") || strings.Contains(d.text, "stored secret") ||
					strings.Contains(d.text, "removed secret") || !strings.Contains(d.str("diff"), "+other new\n") ||
					!strings.Contains(d.str("stderr"), `the diff of "secret.txt" is left out`) ||
					!strings.Contains(d.str("stderr"), `the diff of "sub/secret.txt" is left out`) ||
					strings.Contains(d.str("stderr"), `the diff of "copy.txt" is left out`) != (backend == "hg") ||
					strings.Contains(d.str("diff"), "+copy\n") != (backend == "svn") ||
					strings.Count(d.str("diff"), "+in new dir\n") != 1 ||
					(backend == "svn" && (!strings.Contains(d.str("diff"), "Index: at@sign.txt\n") ||
						!strings.Contains(d.str("diff"), "colour") || !strings.Contains(d.str("diff"), "-gone\n"))) {
					t.Errorf("%s: diff %s", name, d.text)
				}
				one := s.wantOK("fs_vcs_diff", map[string]any{"backend": backend, "path": dir, "files": []string{"secret.txt"}})
				if one.str("diff") != "" || strings.Contains(one.text, "secret value") || strings.Contains(one.text, "stored secret") ||
					!strings.Contains(one.str("stderr"), `the diff of "secret.txt" is left out`) {
					t.Errorf("%s: diff of secret.txt alone %s", name, one.text)
				}
				// The removed file's stored content is what hg and svn
				// would show: nothing on the way refuses it.
				two := s.wantOK("fs_vcs_diff", map[string]any{"backend": backend, "path": dir, "files": []string{"sub/secret.txt", "other.txt"}})
				if strings.Contains(two.text, "removed secret") || !strings.Contains(two.str("diff"), "+other new\n") {
					t.Errorf("%s: diff of sub/secret.txt and other.txt %s", name, two.text)
				}
			}
			// A glob anchored at the repository, the call made through a
			// symlink to it: the policy judges real paths.
			if err := os.Symlink(dir, filepath.Join(root, "link")); err != nil {
				t.Fatal(err)
			}
			s := start(t, root, "--vcs", backend, "--deny", "/"+dir+"/secret.txt")
			d := s.wantOK("fs_vcs_diff", map[string]any{"backend": backend, "path": "link"})
			if strings.Contains(d.text, "secret value") || strings.Contains(d.text, "stored secret") ||
				!strings.Contains(d.str("diff"), "-"+removed) || !strings.Contains(d.str("stderr"), `the diff of "secret.txt" is left out`) {
				t.Errorf("through a symlink: diff %s", d.text)
			}
		})
	}
}
