package derive

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// osRoot reads a directory through an os.Root, as the worker does; its
// real paths are the names opened (the test makes no symlinks).
type osRoot struct {
	r    *os.Root
	name string
}

func (o osRoot) Open(rel string) (*os.File, error)    { return o.r.Open(rel) }
func (o osRoot) Stat(rel string) (fs.FileInfo, error) { return o.r.Stat(rel) }
func (o osRoot) RealPath(rel string, _ *os.File) (string, error) {
	return filepath.Clean(rel), nil
}
func (o osRoot) Name() string { return o.name }

// A repository's hooks path, its included files (relative and absolute,
// nested) and its worktree configuration are protected; a path outside
// the root, or under a home directory, is not the root's to protect; a
// changed source makes the repository stale.
func TestDerive(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("r/.git/config", "[core]\n\thooksPath = tools/hooks\n[include]\n\tpath = ../extra.cfg\n\tpath = ~/x\n\tpath = /elsewhere\n")
	write("r/extra.cfg", "[includeIf \"gitdir:x/\"]\n\tpath = "+filepath.Join(dir, "abs.cfg")+"\n")
	write("abs.cfg", "[core]\n\thooksPath = /outside/hooks\n")
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	root := osRoot{r, dir}
	repo := Derive(root, "r/.git")
	var got []string
	for _, e := range repo.Entries {
		got = append(got, e.Path+" <- "+e.From)
	}
	slices.Sort(got)
	want := []string{"abs.cfg <- r/extra.cfg", "r/extra.cfg <- r/.git/config", "r/tools/hooks <- r/.git/config"}
	if !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	if repo.Stale(root) {
		t.Errorf("stale before any change")
	}
	write("r/extra.cfg", "")
	if !repo.Stale(root) {
		t.Errorf("not stale after an included file changed")
	}
}
