package worker

import (
	"bytes"
	"context"
	"io"

	"github.com/fsmcp/fsmcp/worker/internal/diff"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
)

// unifiedDiff is diff.Unified, whose only failure is a bug.
func unifiedDiff(p string, old, new []byte, oldExists, newExists bool, linesBefore int) []byte {
	u, err := diff.Unified(p, old, new, oldExists, newExists, linesBefore)
	if err != nil {
		bug(err)
	}
	return u
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
	lines, err := fileio.CountLines(ctx, cur.f, from)
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
