package worker

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/aymanbagabas/go-udiff"
)

// diffContext is the number of unchanged lines around each hunk, as diff -u
// and git diff write them.
const diffContext = 3

// unifiedDiff returns the unified diff that turns old into new, labelled
// a/p and b/p (or /dev/null for a side that does not exist), empty when
// they are equal. linesBefore is how many lines of the file precede old
// and new, which are a window of it. Only the part between the common prefix and suffix (plus
// context) is diffed, so a small edit of a large file costs little more than
// finding where it is; the hunks' line numbers count the trimmed prefix.
//
// The diff is computed by github.com/aymanbagabas/go-udiff, the Go tools'
// own diff (golang.org/x/tools/internal/diff) made importable.
func unifiedDiff(p string, old, new []byte, oldExists, newExists bool, linesBefore int) []byte {
	if bytes.Equal(old, new) && oldExists == newExists {
		return nil
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
		bug(err)
		return nil
	}
	if len(u.Hunks) == 0 {
		// Only the labels differ: an empty file created or deleted.
		return []byte("--- " + from + "\n+++ " + to + "\n")
	}
	for _, h := range u.Hunks {
		h.FromLine += line
		h.ToLine += line
	}
	return []byte(u.String())
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

// diffWindow bounds how far a spliced body's diff reads around the change
// for its context lines; a context line longer than this is cut short.
const diffWindow = 64 << 10

// diff is the unified diff of the change b makes to cur. A whole body is
// diffed against cur's bytes (read by current with all); a spliced one
// reads only a window around the change, so that a dry-run append to a
// large file does not read it all, except to count the lines before the
// window.
func (b *body) diff(ctx context.Context, p string, cur *current) ([]byte, error) {
	if !b.spliced {
		return unifiedDiff(p, cur.data, b.data, cur.exists, true, 0), nil
	}
	from := max(0, b.off-diffWindow)
	to := min(cur.st.Size, b.off+b.delete+diffWindow)
	win := make([]byte, to-from)
	if _, err := cur.f.ReadAt(win, from); err != nil && err != io.EOF {
		return nil, err
	}
	// Start the window at a line start, so the hunks' line numbers hold.
	if from > 0 {
		i := bytes.IndexByte(win, '\n')
		// A line longer than the window before the change is shown
		// from the window's start; its line number still holds.
		if i >= 0 && from+int64(i) < b.off {
			win, from = win[i+1:], from+int64(i)+1
		}
	}
	lines, err := countLines(ctx, cur.f, from)
	if err != nil {
		return nil, err
	}
	rel := b.off - from
	nw := make([]byte, 0, len(win)-int(b.delete)+len(b.insert))
	nw = append(append(append(nw, win[:rel]...), b.insert...), win[rel+b.delete:]...)
	// Cut both at the last newline of the common tail, unless the window
	// reaches the file's end.
	if to < cur.st.Size {
		if i := bytes.LastIndexByte(win[rel+b.delete:], '\n'); i >= 0 {
			cut := len(win) - (int(rel+b.delete) + i + 1)
			win, nw = win[:len(win)-cut], nw[:len(nw)-cut]
		}
	}
	return unifiedDiff(p, win, nw, true, true, lines), nil
}

// countLines counts the newlines in the first n bytes of f.
func countLines(ctx context.Context, f *os.File, n int64) (int, error) {
	c := &lineCounter{}
	err := hashRange(ctx, c, f, 0, n)
	return c.n, err
}

type lineCounter struct{ n int }

func (c *lineCounter) Write(b []byte) (int, error) {
	c.n += bytes.Count(b, []byte("\n"))
	return len(b), nil
}
