package hunks

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/worker/internal/nomatch"
)

// maxAmbiguousCount bounds how many places of a hunk's context are
// counted for ambiguous_match.
const maxAmbiguousCount = 1000

// Hunk is one change of a patch in either format: old lines (with their
// line endings exactly) replaced by new ones.
type Hunk struct {
	Old, New []byte
	// atEnd: old must end at the end of the file.
	AtEnd bool
	// anchors (an envelope's "@@ text" lines) are found in turn first;
	// the old lines are searched after the last.
	Anchors [][]byte
	// after places a hunk with no old lines: after this line (a unified
	// diff's header), or, when -1, right after the anchors (an envelope),
	// else at the end of the file.
	After int64
	// name names it in messages.
	Name string
}

// ApplyDiff applies a unified diff's fragments to data (see Apply).
func ApplyDiff(p string, data []byte, frags []*gitdiff.TextFragment, deletion bool) ([]byte, error) {
	hunks := make([]Hunk, len(frags))
	for i, frag := range frags {
		h := &hunks[i]
		for _, l := range frag.Lines {
			if l.Old() {
				h.Old = append(h.Old, l.Line...)
			}
			if l.New() {
				h.New = append(h.New, l.Line...)
			}
		}
		h.AtEnd = len(h.Old) > 0 && h.Old[len(h.Old)-1] != '\n'
		h.After = frag.OldPosition
		h.Name = fmt.Sprintf("hunk %d (@@ -%d,%d)", i+1, frag.OldPosition, frag.OldLines)
	}
	return Apply(p, data, hunks, deletion)
}

// Apply applies the hunks to data, byte for byte, in the order
// the patch gives them, as patch(1) does: each hunk's old lines (context
// and removed, with their line endings exactly) must occur at a line start
// at or after the end of the previous hunk (and, with atEnd, at the
// file's end), and only once before the place of the next hunk (for the
// last hunk, before the file's end); line numbers are not used to find
// it, and no fuzz is allowed. An envelope's anchors move the search start
// first: each to just past the first line at or after it that equals the
// anchor (ignoring spaces and tabs around both). A hunk with no old lines
// goes after the line its header names (which may not lie before the
// previous hunk's end), or for an envelope right after its anchors, or at
// the end of the file. A deletion must leave nothing. Every search starts
// where the previous one ends, so the cost is the file plus the patch.
func Apply(p string, data []byte, hunks []Hunk, deletion bool) ([]byte, error) {
	out := make([]byte, 0, len(data))
	// prev is the previous hunk's place and old text, whose uniqueness is
	// checked up to this hunk's place; end and line are where it ends,
	// and how many lines lie before that.
	type placed struct {
		start int
		h     *Hunk
	}
	var prev *placed
	end, line := 0, 0
	// unique refuses prev if it occurs again before limit.
	unique := func(limit int) error {
		if prev == nil || len(prev.h.Old) == 0 {
			return nil
		}
		old := prev.h.Old
		more := findLines(data[:min(len(data), limit+len(old)-1)], old, prev.h.AtEnd, prev.start+1, maxAmbiguousCount-1)
		if len(more) == 0 {
			return nil
		}
		all := append([]int{prev.start}, more...)
		e := link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_AMBIGUOUS_MATCH, p,
			"patch: %s matches %d places (lines %s); add context to make it unique", prev.h.Name, len(all), lineList(data, all))
		e.Count = int64(len(all))
		return e
	}
	for i := range hunks {
		h := &hunks[i]
		from := end
		for _, a := range h.Anchors {
			next := findAnchor(data, from, a)
			if next < 0 {
				return nil, link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, p,
					"patch: %s: no line %q after the previous change (an @@ anchor is a whole line of the file, found in the order given)", h.Name, a)
			}
			from = next
		}
		var at int
		switch {
		case len(h.Old) == 0 && h.After >= 0:
			off, ok := afterLine(data, end, line, h.After)
			switch {
			case !ok && h.After >= int64(line):
				return nil, link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, p, "patch: hunk %d inserts after line %d, past the end of the file", i+1, h.After)
			case !ok:
				return nil, outOfOrder(p, i, i+1)
			}
			at = off
		case len(h.Old) == 0 && len(h.Anchors) > 0:
			at = from
		case len(h.Old) == 0:
			at = len(data)
		default:
			found := findLines(data, h.Old, h.AtEnd, from, 1)
			switch {
			case len(found) == 0 && len(h.Anchors) > 0 && len(findLines(data, h.Old, h.AtEnd, end, 1)) > 0:
				return nil, link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, p, "patch: %s: its lines occur only before its @@ anchor", h.Name)
			case len(found) == 0 && i > 0 && len(findLines(data, h.Old, h.AtEnd, 0, 1)) > 0:
				return nil, outOfOrder(p, i, i+1)
			case len(found) == 0:
				return nil, noMatch(p, data, h.Old, "patch: %s does not match the file exactly", h.Name)
			}
			at = found[0]
		}
		if err := unique(at); err != nil {
			return nil, err
		}
		out = append(out, data[end:at]...)
		if len(h.Old) == 0 && at == len(data) && at > 0 && data[at-1] != '\n' && len(h.New) > 0 {
			// Lines added after a last line without a newline: it gets
			// one, of the kind the added lines end with.
			out = append(out, LineEnding(h.New)...)
		}
		out = append(out, h.New...)
		line += bytes.Count(data[end:at+len(h.Old)], []byte{'\n'})
		end = at + len(h.Old)
		prev = &placed{start: at, h: h}
	}
	if err := unique(len(data)); err != nil {
		return nil, err
	}
	out = append(out, data[end:]...)
	if deletion && len(out) > 0 {
		return nil, link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, p, "patch: the patch deletes the file, but the file holds %d bytes the patch does not show", len(out))
	}
	return out, nil
}

// LineEnding is the line ending that ends b: "\r\n" or "\n".
func LineEnding(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i > 0 && b[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// findAnchor returns the offset just past the first line at or after
// offset from (a line start) equal to anchor, spaces and tabs around
// both ignored; -1 if there is none.
func findAnchor(data []byte, from int, anchor []byte) int {
	want := bytes.Trim(anchor, " \t")
	for off := from; off < len(data); {
		lineEnd := len(data)
		next := len(data)
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			lineEnd, next = off+i, off+i+1
		}
		if bytes.Equal(bytes.Trim(bytes.TrimSuffix(data[off:lineEnd], []byte{'\r'}), " \t"), want) {
			return next
		}
		off = next
	}
	return -1
}

func outOfOrder(p string, prev, hunk int) error {
	return link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p,
		"patch: hunk %d matches only before the end of hunk %d; hunks must be in the order of the file and may not overlap", hunk, prev)
}

// findLines returns the offsets, from offset from on, of the line starts
// in data where old occurs (ending at the end of data, with atEnd), at
// most limit of them.
func findLines(data, old []byte, atEnd bool, from, limit int) []int {
	var at []int
	for i := from; i <= len(data)-len(old) && len(at) < limit; {
		j := bytes.Index(data[i:], old)
		if j < 0 {
			break
		}
		pos := i + j
		if (pos == 0 || data[pos-1] == '\n') && (!atEnd || pos+len(old) == len(data)) {
			at = append(at, pos)
		}
		i = pos + 1
	}
	return at
}

// afterLine is the offset just after the first n lines of data, counting
// on from offset off, after line lines; false when n lies before that or
// past the end (a last line without a newline counts).
func afterLine(data []byte, off, line int, n int64) (int, bool) {
	if n < int64(line) {
		return 0, false
	}
	for ; int64(line) < n; line++ {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return len(data), int64(line)+1 == n && off < len(data)
		}
		off += i + 1
	}
	return off, true
}

// lineList names the lines of the first few offsets, for a message.
func lineList(data []byte, at []int) string {
	var b strings.Builder
	for i, off := range at {
		if i == 5 {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(bytes.Count(data[:off], []byte("\n")) + 1))
	}
	return b.String()
}

// noMatch is the no_match error for text missing from data, with the
// nearest candidate when there is one, described in the message too.
func noMatch(p string, data, text []byte, format string, args ...any) *link.Error {
	e := link.Errorf(fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, p, format, args...)
	if n := nomatch.Find(data, text); n != nil {
		e.Nearest = n
		e.Message += nomatch.Describe(n)
	}
	return e
}
