package rgargs

import (
	"errors"
	"slices"
	"strings"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// Check refuses a NUL and an over-long value, and nothing else.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		v    string
		want error
	}{
		{"fine -x --glob=y", nil},
		{"a\x00b", ErrNUL},
		{strings.Repeat("x", MaxArgBytes), nil},
		{strings.Repeat("x", MaxArgBytes+1), ErrTooLong},
	} {
		if err := Check(c.v); !errors.Is(err, c.want) {
			t.Errorf("Check(%.20q) = %v, want %v", c.v, err, c.want)
		}
	}
}

// The client's values reach rg only as option values, after the options
// that keep rg from reading configuration; the exclusions come last.
func TestClientValuesAreOptionValues(t *testing.T) {
	grep := Grep(&fsmcpv1.GrepRequest{Pattern: "--pre=sh", Globs: []string{"-x"}, Type: "go", IgnoreCase: true, Context: 2}, false)
	glob := Glob(&fsmcpv1.GlobRequest{Pattern: "--files", Excludes: []string{"vendor"}, MaxDepth: 3})
	tree := Tree(&fsmcpv1.TreeRequest{MaxDepth: 2, Hidden: true})
	for name, args := range map[string][]string{"grep": grep, "glob": glob, "tree": tree} {
		if !slices.Equal(args[:4], []string{"--no-config", "--no-ignore-parent", "--no-ignore-global", "--no-follow"}) {
			t.Errorf("%s starts %q", name, args[:4])
		}
		for _, a := range args {
			if !strings.HasPrefix(a, "--") {
				t.Errorf("%s: %q is not an option", name, a)
			}
		}
	}
	for _, want := range []string{"--json", "--regexp=--pre=sh", "--glob=-x", "--type=go", "--ignore-case", "--context=2"} {
		if !slices.Contains(grep, want) {
			t.Errorf("grep %q lacks %q", grep, want)
		}
	}
	if want := []string{"--glob=--files", "--max-depth=3", "--glob=!vendor"}; !slices.Equal(glob[len(glob)-3:], want) {
		t.Errorf("glob ends %q, want %q", glob[len(glob)-3:], want)
	}
	if !slices.Contains(tree, "--max-depth=3") || !slices.Contains(tree, "--hidden") || !slices.Contains(tree, "--debug") {
		t.Errorf("tree %q", tree)
	}
}
