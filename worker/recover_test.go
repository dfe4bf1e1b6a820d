package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/patchlog"
)

// stateFor opens the state directory of the test root dir, a sibling of
// it made if missing, closed with the test.
func stateFor(t testing.TB, dir string) *os.File {
	t.Helper()
	p := filepath.Clean(dir) + ".state"
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// sealJournal writes j into the state directory as writeJournal would,
// for a journal a test forged.
func sealJournal(t *testing.T, s *Service, j *patchlog.Journal) string {
	t.Helper()
	name, err := patchlog.Write(int(s.state.Fd()), j)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// interruptedPatch leaves what a crash inside threePatch's commit leaves,
// with every file placed: files a, b and c hold "y", their old versions
// are under the temp names, and the journal is in the state directory.
func interruptedPatch(t *testing.T, s *Service, dir string) (*patchlog.Journal, []*patchFile) {
	t.Helper()
	for _, n := range []string{"a", "b", "c"} {
		wput(t, filepath.Join(dir, n), "x\n")
	}
	files, err := parsePatch(threePatch())
	if err != nil {
		t.Fatal(err)
	}
	stageByHand(t, s, files)
	j := &patchlog.Journal{RootDev: s.rootDev, RootIno: s.rootIno}
	for _, f := range files {
		j.Entries = append(j.Entries, f.entry())
	}
	for _, f := range files {
		if _, err := s.place(context.Background(), f.st, f.base, f.path, f.cur); err != nil {
			t.Fatal(err)
		}
	}
	return j, files
}

// A journal that does not verify is set aside, whole, and nothing it
// names is touched; start-up goes on. Each case breaks one check.
func TestRecoverSetsAsideWhatDoesNotVerify(t *testing.T) {
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for _, c := range []struct {
		name   string
		reason string
		// spoil forges or damages the journal of an interrupted patch,
		// or its files, and writes it; it returns the journal's name.
		spoil func(t *testing.T, s *Service, dir string, j *patchlog.Journal, files []*patchFile) string
	}{
		{"tampered", "sha256 does not match", func(t *testing.T, s *Service, dir string, j *patchlog.Journal, _ []*patchFile) string {
			name := sealJournal(t, s, j)
			p := filepath.Join(s.state.Name(), name)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"replace"`), []byte(`"create"`), 1), 0o600)
			return name
		}},
		{"another root", "written for another root", func(t *testing.T, s *Service, _ string, j *patchlog.Journal, _ []*patchFile) string {
			j.RootIno++
			return sealJournal(t, s, j)
		}},
		{"staged file changed", "the staged file", func(t *testing.T, s *Service, dir string, j *patchlog.Journal, files []*patchFile) string {
			// The old version of b, under its temp name, rewritten in
			// place: same inode, same size, other bytes.
			os.WriteFile(filepath.Join(dir, files[1].tmp), []byte("z\n"), 0o644)
			return sealJournal(t, s, j)
		}},
		{"not a temp name", "is not a temp name", func(t *testing.T, s *Service, _ string, j *patchlog.Journal, _ []*patchFile) string {
			j.Entries[0].Tmp = []byte("b")
			return sealJournal(t, s, j)
		}},
		{"name of more than one component", "is not one name", func(t *testing.T, s *Service, _ string, j *patchlog.Journal, _ []*patchFile) string {
			j.Entries[2].Name = []byte("sub/c")
			return sealJournal(t, s, j)
		}},
		{"directory through a symlink", "resolves to", func(t *testing.T, s *Service, dir string, j *patchlog.Journal, _ []*patchFile) string {
			if err := os.Symlink("sub", filepath.Join(dir, "lnk")); err != nil {
				t.Fatal(err)
			}
			j.Entries[2].Dir = []byte("lnk")
			return sealJournal(t, s, j)
		}},
		{"protected name", "is protected", func(t *testing.T, s *Service, dir string, j *patchlog.Journal, _ []*patchFile) string {
			// The forgery, here in the state directory: a
			// "delete" whose old version is the agent's hook, which
			// undoing would rename into place.
			hook := []byte("#!/bin/sh\necho owned\n")
			tmp := tempPrefix + "payload"
			wput(t, filepath.Join(dir, ".git", "hooks", tmp), string(hook))
			st, err := os.Stat(filepath.Join(dir, ".git", "hooks", tmp))
			if err != nil {
				t.Fatal(err)
			}
			j.Entries = append(j.Entries, patchlog.Entry{Dir: []byte(".git/hooks"), Name: []byte("pre-commit"), Tmp: []byte(tmp),
				Kind: "delete", OldIno: st.Sys().(*syscall.Stat_t).Ino, OldSize: int64(len(hook)), OldSHA: sum(hook)})
			return sealJournal(t, s, j)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root")
			wput(t, filepath.Join(dir, "sub", "keep"), "")
			s := newServiceWith(t, dir, Options{Policy: sandbox.Policy{Protect: sandbox.DefaultProtect}})
			j, files := interruptedPatch(t, s, dir)
			name := c.spoil(t, s, dir, j, files)
			r, err := s.recoverJournals("")
			if err != nil || r.Undone != 0 || len(r.SetAside) != 1 {
				t.Fatalf("Recover() = %+v, %v; want one journal set aside", r, err)
			}
			if a := r.SetAside[0]; a.Name != setAsideDir+"/"+name || !strings.Contains(a.Reason, c.reason) {
				t.Errorf("set aside %+v, want %s/%s because %q", a, setAsideDir, name, c.reason)
			}
			if _, err := os.Stat(filepath.Join(s.state.Name(), setAsideDir, name)); err != nil {
				t.Errorf("the journal is not kept in %s/: %v", setAsideDir, err)
			}
			if js, _ := s.journals(); len(js) != 0 {
				t.Errorf("journals left to replay: %v", js)
			}
			for _, n := range []string{"a", "b", "c"} {
				if got := wcontent(t, filepath.Join(dir, n)); got != "y\n" {
					t.Errorf("%s = %q: recovery acted on a journal that does not verify", n, got)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, ".git", "hooks", "pre-commit")); err == nil {
				t.Error("recovery installed the hook")
			}
		})
	}
}

// A journal an earlier version wrote into the root is never read: it is
// moved to set-aside/ in the state directory, by a rename or, with the
// state directory on another filesystem (/dev/shm), by a copy, and what
// it names stays as it is, here a hook it would have put in place.
func TestRecoverLegacyJournalInRoot(t *testing.T) {
	for _, where := range []string{"same filesystem", "other filesystem"} {
		t.Run(where, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root")
			hook := "#!/bin/sh\necho owned\n"
			tmp := tempPrefix + "payload"
			wput(t, filepath.Join(dir, ".git", "hooks", tmp), hook)
			st, err := os.Stat(filepath.Join(dir, ".git", "hooks", tmp))
			if err != nil {
				t.Fatal(err)
			}
			// The old format: no header, no root, no sizes or sums.
			b, _ := json.Marshal(map[string]any{"entries": []map[string]any{{"dir": []byte(".git/hooks"), "name": []byte("pre-commit"),
				"tmp": []byte(tmp), "kind": "delete", "old_ino": st.Sys().(*syscall.Stat_t).Ino}}})
			legacy := legacyJournalPrefix + "0123"
			wput(t, filepath.Join(dir, legacy), string(b))
			var opts Options
			if where == "other filesystem" {
				shm, err := os.MkdirTemp("/dev/shm", "fsmcp-state-")
				if err != nil {
					t.Skip(err)
				}
				t.Cleanup(func() { os.RemoveAll(shm) })
				var a, b syscall.Stat_t
				if syscall.Stat(shm, &a) != nil || syscall.Stat(dir, &b) != nil || a.Dev == b.Dev {
					t.Skip("/dev/shm is on the root's filesystem")
				}
				opts.State = stateFor(t, shm)
			}
			s := newServiceWith(t, dir, opts)
			r, err := s.recoverJournals("")
			if err != nil || len(r.SetAside) != 1 || r.SetAside[0].Name != setAsideDir+"/root-"+legacy {
				t.Fatalf("Recover() = %+v, %v; want the root's journal set aside", r, err)
			}
			if got, err := os.ReadFile(filepath.Join(s.state.Name(), setAsideDir, "root-"+legacy)); err != nil || !bytes.Equal(got, b) {
				t.Errorf("set-aside copy = %q, %v; want the journal as it was", got, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, legacy)); err == nil {
				t.Error("the journal is still in the root")
			}
			if _, err := os.Lstat(filepath.Join(dir, ".git", "hooks", "pre-commit")); err == nil {
				t.Error("recovery replayed the root's journal: the hook is in place")
			}
		})
	}
}

// A read-only start changes nothing: a journal an earlier version left in
// the root is named and left there, and a journal in the state directory
// refuses the start.
func TestRecoverReadOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root")
	legacy := legacyJournalPrefix + "old"
	wput(t, filepath.Join(dir, legacy), "{}")
	s := newTestService(t, dir)
	r, err := s.checkReadOnly()
	if err != nil || len(r.SetAside) != 1 || !strings.Contains(r.SetAside[0].Reason, "left in the root") {
		t.Fatalf("CheckReadOnly() = %+v, %v; want the root's journal named and left", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, legacy)); err != nil {
		t.Errorf("a read-only start moved the root's journal: %v", err)
	}
	sealJournal(t, s, &patchlog.Journal{RootDev: s.rootDev, RootIno: s.rootIno})
	if _, err := s.checkReadOnly(); err != errJournalReadOnly {
		t.Errorf("CheckReadOnly() with a journal = %v, want errJournalReadOnly", err)
	}
}
