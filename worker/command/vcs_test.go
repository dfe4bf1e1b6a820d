package command

import (
	"slices"
	"strings"
	"testing"
)

// filterDiff drops each denied file's section of a git diff, whatever
// its name (spaces, a quoted name with octal escapes, " b/" inside it),
// keeps the others whole, and leaves out a header it cannot parse.
func TestFilterDiff(t *testing.T) {
	sections := map[string]string{
		"keep.txt":            "diff --git a/keep.txt b/keep.txt\n--- a/keep.txt\n+++ b/keep.txt\n@@ -1 +1 @@\n-a\n+b\n",
		"secret/x y.txt":      "diff --git a/secret/x y.txt b/secret/x y.txt\n@@ -1 +1 @@\n-SECRET\n+SECRET2\n",
		"d b/e.txt":           "diff --git a/d b/e.txt b/d b/e.txt\n@@ -1 +1 @@\n-kept\n+kept2\n",
		"secret/\xc3\xa9.txt": "diff --git \"a/secret/\\303\\251.txt\" \"b/secret/\\303\\251.txt\"\n@@ -1 +1 @@\n-SECRET3\n",
		"q\"uote.txt":         "diff --git \"a/q\\\"uote.txt\" \"b/q\\\"uote.txt\"\n@@ -1 +1 @@\n-fine\n",
		"bad":                 "diff --git a/one b/two\n@@ -1 +1 @@\n-UNJUDGED\n",
	}
	var all string
	order := []string{"keep.txt", "secret/x y.txt", "d b/e.txt", "secret/\xc3\xa9.txt", "q\"uote.txt", "bad"}
	for _, p := range order {
		all += sections[p]
	}
	out, left := filterDiff([]byte(all), func(p string) (string, bool) { return "", strings.HasPrefix(p, "secret/") })
	want := sections["keep.txt"] + sections["d b/e.txt"] + sections["q\"uote.txt"]
	if string(out) != want {
		t.Errorf("kept:\n%s\nwant:\n%s", out, want)
	}
	if !slices.Equal(left, []string{"secret/x y.txt", "secret/\xc3\xa9.txt", "a/one b/two"}) {
		t.Errorf("left out %q", left)
	}
}
