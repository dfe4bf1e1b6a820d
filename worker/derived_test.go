package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// derivedService is a Service over a root holding files (path → content;
// a content starting with "->" makes a symlink to the rest), with no
// glob policy: only derived protection.
func derivedService(t *testing.T, files map[string]string) (string, *Service) {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, full)
		} else {
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s, err := New(r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return root, s
}

// derivedOf is the service's derived entries as "path <- from", sorted.
func derivedOf(s *Service) []string {
	var got []string
	for _, e := range s.derivedList() {
		got = append(got, e.Path+" <- "+e.From)
	}
	slices.Sort(got)
	return got
}

// TestDerivedEntries: what each repository layout derives.
func TestDerivedEntries(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"no hooksPath", map[string]string{".git/config": "[core]\n\tbare = false\n"}, nil},
		{"relative hooksPath", map[string]string{".git/config": "[core]\n\thooksPath = .githooks\n"},
			[]string{".githooks <- .git/config"}},
		{"nested repository, relative to its worktree", map[string]string{"a/b/.git/config": "[core]\nhooksPath = ../tools/hooks\n"},
			[]string{"a/tools/hooks <- a/b/.git/config"}},
		{"last of several, all counted", map[string]string{".git/config": "[core]\nhooksPath = h1\n[core]\nhooksPath = h2\n"},
			[]string{"h1 <- .git/config", "h2 <- .git/config"}},
		{"outside the root or home", map[string]string{"r/.git/config": "[core]\nhooksPath = ../../x\n[core]\nhooksPath = ~/hooks\n[core]\nhooksPath = /nonexistent/h\n"}, nil},
		{"include, relative to the including file", map[string]string{
			".git/config":    "[include]\n\tpath = ../conf/git.cfg\n",
			"conf/git.cfg":   "[includeIf \"gitdir:/x/\"]\n\tpath = more.cfg\n",
			"conf/more.cfg":  "[core]\n\thooksPath = ci/hooks\n",
			"conf/other.cfg": "[core]\n\thooksPath = not-included\n",
		}, []string{"ci/hooks <- conf/more.cfg", "conf/git.cfg <- .git/config", "conf/more.cfg <- conf/git.cfg"}},
		{"include cycle stops", map[string]string{
			".git/config": "[include]\npath = ../loop.cfg\n", "loop.cfg": "[include]\npath = loop.cfg\n[core]\nhooksPath = h\n",
		}, []string{"h <- loop.cfg", "loop.cfg <- .git/config", "loop.cfg <- loop.cfg"}},
		{"includes that fan out stop, protecting the worktree", map[string]string{
			"w/.git/config": "[include]\npath = ../f.cfg\n", "w/f.cfg": strings.Repeat("[include]\npath = f.cfg\n", 50),
		}, []string{"w <- w/.git/config.worktree", "w <- w/f.cfg", "w/f.cfg <- w/.git/config", "w/f.cfg <- w/f.cfg"}},
		{"symlinked hooks directory", map[string]string{
			".git/config": "[core]\nhooksPath = tools/hooks\n", "tools": "->real", "real/x": "",
		}, []string{"real/hooks <- .git/config", "tools/hooks <- .git/config"}},
		{"unparsable: the whole worktree", map[string]string{"w/.git/config": "[core\nhooksPath = h\n"},
			[]string{"w <- w/.git/config"}},
		{"a .git file", map[string]string{
			"wt/.git": "gitdir: ../main/.git/worktrees/wt\n", "main/.git/worktrees/wt/commondir": "../..\n",
			"main/.git/config": "[core]\nhooksPath = hooks\n",
		}, []string{
			"main/.git <- main/.git/worktrees/wt/commondir", "main/.git/worktrees/wt <- wt/.git",
			"main/hooks <- main/.git/config", "wt/hooks <- main/.git/config",
		}},
		{"a .git symlink", map[string]string{".git": "->gd", "gd/config": "[core]\nhooksPath = h\n"},
			[]string{"gd <- .git", "h <- gd/config"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s := derivedService(t, c.files)
			if got := derivedOf(s); !slices.Equal(got, c.want) {
				t.Errorf("derived = %q, want %q", got, c.want)
			}
		})
	}
}

// TestDerivedFollowsTheHost: a change of the configuration by the host,
// a repository the host creates, and one it removes count from the next
// mutation on.
func TestDerivedFollowsTheHost(t *testing.T) {
	root, s := derivedService(t, map[string]string{".git/config": "[core]\nhooksPath = one\n"})
	protected := func(rel string) bool {
		s.refreshDerived(rel)
		_, ok := s.derivedProtected(rel, false)
		return ok
	}
	if !protected("one/pre-commit") || protected("two/pre-commit") {
		t.Fatalf("before: %q", derivedOf(s))
	}
	// Same size, same second: the stamp still tells (ctime, inode).
	cfg := filepath.Join(root, ".git", "config")
	fi, _ := os.Stat(cfg)
	if err := os.WriteFile(cfg+".lock", []byte("[core]\nhooksPath = two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(cfg+".lock", fi.ModTime(), fi.ModTime())
	if err := os.Rename(cfg+".lock", cfg); err != nil {
		t.Fatal(err)
	}
	if protected("one/pre-commit") || !protected("two/pre-commit") {
		t.Fatalf("after the host's edit: %q", derivedOf(s))
	}
	// A repository made after the walk, found from the mutated path.
	if err := os.MkdirAll(filepath.Join(root, "new", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "new", ".git", "config"), []byte("[core]\nhooksPath = h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !protected("new/h/pre-push") {
		t.Fatalf("new repository: %q", derivedOf(s))
	}
	if err := os.RemoveAll(filepath.Join(root, "new", ".git")); err != nil {
		t.Fatal(err)
	}
	if protected("new/h/pre-push") {
		t.Fatalf("removed repository: %q", derivedOf(s))
	}
}

// TestDerivedFifoConfig: a fifo where the configuration should be never
// blocks the worker: it is not read, and the worktree is protected.
func TestDerivedFifoConfig(t *testing.T) {
	root, s := derivedService(t, map[string]string{"w/.git/HEAD": "ref: refs/heads/main\n"})
	if err := unix.Mkfifo(filepath.Join(root, "w", ".git", "config"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() { done <- derivedOf(s) }()
	select {
	case got := <-done:
		if want := []string{"w <- w/.git/config"}; !slices.Equal(got, want) {
			t.Errorf("derived = %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the derivation blocked on a fifo")
	}
}

// TestDerivedLinks: the start-up walk shows derived protection, too, the
// other names of the files it protects.
func TestDerivedLinks(t *testing.T) {
	root, s := derivedService(t, map[string]string{".git/config": "[core]\nhooksPath = h\n", "h/pre-commit": "exit 0\n"})
	if err := os.Link(filepath.Join(root, "h", "pre-commit"), filepath.Join(root, "twin")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.sweep(time.Now(), false); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := s.openMutationPath(context.Background(), "write", "twin", accessRewrite)
	var e *Error
	if !errors.As(err, &e) || !e.PolicyViolation || !strings.Contains(e.Message, "derived from .git/config") {
		t.Fatalf("openMutation(twin) = %v, want a refusal naming the hook and its source", err)
	}
}

// TestDerivedAbsoluteHooksPath: an absolute core.hooksPath that lands
// inside the root is that root-relative directory.
func TestDerivedAbsoluteHooksPath(t *testing.T) {
	root, s := derivedService(t, map[string]string{"r/x": ""})
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	cfg := "[core]\n\thooksPath = " + filepath.Join(real, "shared", "hooks") + "\n"
	if err := os.MkdirAll(filepath.Join(root, "r", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "r", ".git", "config"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := derivedOf(s), []string{"shared/hooks <- r/.git/config"}; !slices.Equal(got, want) {
		t.Errorf("derived = %q, want %q", got, want)
	}
}
