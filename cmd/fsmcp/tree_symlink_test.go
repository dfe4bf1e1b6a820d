package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The reproduction of a tree whose only entries rg does not name are
// symlinks to directories (one inside, one leading out of the root): no
// empty directory sends the walk to read the root, and fs_tree lists
// both links as symlinks beside the file link and the files.
func TestTreeListsDirectorySymlinks(t *testing.T) {
	base := t.TempDir()
	r := filepath.Join(base, "r")
	for _, d := range []string{"pkg/brew", "t", "../outside"} {
		if err := os.MkdirAll(filepath.Join(r, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(r, "pkg", "brew", "f.rb"), []byte("x\n"), 0o644)
	writeFile(t, filepath.Join(r, "t", "f.txt"), []byte("y\n"), 0o644)
	for name, target := range map[string]string{"HomebrewFormula": "pkg/brew", "filelink": "pkg/brew/f.rb", "dirlink_out": "../outside"} {
		if err := os.Symlink(target, filepath.Join(r, name)); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, r)
	got, _ := treeAll(t, s, map[string]any{"path": "", "max_depth": 3}, 1<<20)
	want := []string{"HomebrewFormula symlink", "dirlink_out symlink", "filelink symlink", "pkg directory", "pkg/brew directory",
		"pkg/brew/f.rb file 2", "t directory", "t/f.txt file 2"}
	if !slices.Equal(got, want) {
		t.Errorf("fs_tree:\n got %q\nwant %q", got, want)
	}
}
