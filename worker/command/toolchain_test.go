package command

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestToolHelpers: go brings its tool directory, a gcc-style driver what
// -print-prog-name names, anything else nothing.
func TestToolHelpers(t *testing.T) {
	names := func(paths []string) []string {
		var n []string
		for _, p := range paths {
			n = append(n, filepath.Base(p))
		}
		return n
	}
	for _, c := range []struct {
		prog string
		want []string
	}{
		{"/usr/local/go/bin/go", []string{"compile", "asm", "link", "vet"}},
		{"/usr/bin/cc", []string{"cc1", "collect2"}},
		{"/bin/sh", nil},
	} {
		if _, err := os.Stat(c.prog); err != nil {
			t.Logf("%s: %v", c.prog, err)
			continue
		}
		real, err := filepath.EvalSymlinks(c.prog)
		if err != nil {
			t.Fatal(err)
		}
		got, err := toolHelpers(c.prog, real)
		if err != nil {
			t.Fatalf("%s: %v", c.prog, err)
		}
		for _, w := range c.want {
			if !slices.Contains(names(got), w) {
				t.Errorf("%s: helpers %q lack %s", c.prog, got, w)
			}
		}
		if c.want == nil && len(got) != 0 {
			t.Errorf("%s: helpers %q, want none", c.prog, got)
		}
		for _, h := range got {
			if !filepath.IsAbs(h) {
				t.Errorf("%s: helper %q is not absolute", c.prog, h)
			}
		}
	}
	for name, want := range map[string]bool{
		"cc": true, "gcc": true, "g++": true, "c++": true, "gcc-12": true, "x86_64-linux-gnu-gcc-12": true,
		"aarch64-linux-gnu-g++": true, "clang": false, "sh": false, "gccgo": false, "ccache": false, "make": false,
	} {
		if got := gccDriver.MatchString(name); got != want {
			t.Errorf("gccDriver matches %q = %v", name, got)
		}
	}
}
