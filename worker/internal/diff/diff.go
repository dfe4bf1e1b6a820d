// Package diff writes the unified diff of an edit, as diff -u and git diff
// write it, for fs_write's, fs_replace's and fs_patch's previews. It only
// describes a change; nothing it returns is ever applied.
package diff

import (
	"bytes"

	"github.com/aymanbagabas/go-udiff"
)

// diffContext is the number of unchanged lines around each hunk, as diff -u
// and git diff write them.
const diffContext = 3

// Unified returns the unified diff that turns old into new, labelled
// a/p and b/p (or /dev/null for a side that does not exist), empty when
// they are equal. linesBefore is how many lines of the file precede old
// and new, which are a window of it. Only the part between the common
// prefix and suffix (plus context) is diffed, so a small edit of a large file costs little more than
// finding where it is; the hunks' line numbers count the trimmed prefix.
//
// The diff is computed by github.com/aymanbagabas/go-udiff, the Go tools'
// own diff (golang.org/x/tools/internal/diff) made importable.
func Unified(p string, old, new []byte, oldExists, newExists bool, linesBefore int) ([]byte, error) {
	if bytes.Equal(old, new) && oldExists == newExists {
		return nil, nil
	}
	from, to := "a/"+p, "b/"+p
	if !oldExists {
		from = "/dev/null"
	}
	if !newExists {
		to = "/dev/null"
	}
	start, line := commonPrefixLines(old, new)
	line += linesBefore
	endOld, endNew := commonSuffixLines(old[start:], new[start:])
	ow, nw := old[start:start+endOld], new[start:start+endNew]
	u, err := udiff.ToUnifiedDiff(from, to, string(ow), udiff.Lines(string(ow), string(nw)), diffContext)
	if err != nil {
		return nil, err
	}
	if len(u.Hunks) == 0 {
		// Only the labels differ: an empty file created or deleted.
		return []byte("--- " + from + "\n+++ " + to + "\n"), nil
	}
	for _, h := range u.Hunks {
		h.FromLine += line
		h.ToLine += line
	}
	return []byte(u.String()), nil
}

// commonPrefixLines returns the offset of the start of the line diffContext
// lines before the first line where a and b differ, and how many lines lie
// before it.
func commonPrefixLines(a, b []byte) (int, int) {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	// Back to the start of the differing line, then diffContext more.
	start := bytes.LastIndexByte(a[:i], '\n') + 1
	for range diffContext {
		if start == 0 {
			break
		}
		start = bytes.LastIndexByte(a[:start-1], '\n') + 1
	}
	return start, bytes.Count(a[:start], []byte("\n"))
}

// commonSuffixLines returns how much of a and b to keep so that what is cut
// off is a common suffix of whole lines beyond diffContext lines of context.
func commonSuffixLines(a, b []byte) (int, int) {
	i := 0
	for i < len(a) && i < len(b) && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	// The cut must fall just after a newline in both, diffContext lines
	// after the last difference.
	cut := len(a) - i // first common byte in a
	// Move to the end of the line holding the last difference.
	if j := bytes.IndexByte(a[cut:], '\n'); j >= 0 && cut > 0 {
		cut += j + 1
	} else if cut > 0 {
		return len(a), len(b)
	}
	for range diffContext {
		j := bytes.IndexByte(a[cut:], '\n')
		if j < 0 {
			return len(a), len(b)
		}
		cut += j + 1
	}
	keep := len(a) - cut
	return len(a) - keep, len(b) - keep
}
