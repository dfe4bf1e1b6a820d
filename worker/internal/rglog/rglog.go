// Package rglog reads rg's --debug log: which paths rg's walk skipped by
// a rule (an ignore file, a hidden name, an exclusion), so that a walk of
// its own can leave out exactly what rg leaves out. It trusts the log no
// more than any output of rg: a record is bounded, and a name that holds
// the log's own wording cannot forge a verdict.
package rglog

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// maxRecordBytes bounds a record held while its name's newlines split it;
// no file name is longer.
const maxRecordBytes = 64 << 10

// Log is what a walk learns from rg's --debug lines: the paths its
// walk skipped by a rule, each as rg printed it (lossily, if not UTF-8)
// without "./".
type Log struct {
	mu      sync.Mutex
	skipped map[string]bool
	pending []byte
}

// NewLog is an empty log.
func NewLog() *Log {
	return &Log{skipped: map[string]bool{}}
}

// SkippedOrUnder reports whether rg skipped p (a path below the target)
// or a directory above it.
func (l *Log) SkippedOrUnder(p string) bool {
	lp := lossy(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range len(lp) {
		if lp[i] == '/' && l.skipped[lp[:i]] {
			return true
		}
	}
	return l.skipped[lp]
}

// SubjectMark follows the path in rg's line for an entry that is neither
// a regular file nor a directory. The walk reads those itself; the line
// is known by the mark so that it is not taken for a record that a name
// with a newline split.
const SubjectMark = ": failed to pass subject filter: "

// Line reads one line of rg's --debug output.
func (l *Log) Line(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending != nil {
		// A name with a newline: the record continues.
		b = append(append(l.pending, '\n'), b...)
		l.pending = nil
	}
	const mark = "ignoring ./"
	i := bytes.Index(b, []byte(mark))
	if i < 0 {
		return
	}
	rest := b[i+len(mark):]
	// A name may hold either mark: rg's own comes after the name.
	j, k := bytes.LastIndex(rest, []byte(SubjectMark)), bytes.Index(rest, []byte(": Ignore("))
	if j > k {
		return
	}
	if k >= 0 {
		l.skipped[string(rest[:k])] = true
		return
	}
	if len(b) < maxRecordBytes {
		l.pending = bytes.Clone(b)
	}
}

// Splitter passes rg's stderr on, line by line: debug lines to Debug,
// the rest to Rest. A debug record whose path holds newlines spans lines:
// from its "ignoring ./" to the rule text that ends it, every line is the
// record's.
type Splitter struct {
	Debug func([]byte)
	Rest  io.Writer
	buf   []byte
	// open: the last line began a record that has not ended; held counts
	// its bytes so far.
	open bool
	held int
}

func (d *Splitter) Write(p []byte) (int, error) {
	d.buf = append(d.buf, p...)
	for {
		i := bytes.IndexByte(d.buf, '\n')
		if i < 0 {
			break
		}
		line := d.buf[:i]
		switch {
		case d.open:
			d.held += len(line) + 1
			d.open = !recordEnds(line) && d.held < maxRecordBytes
			d.Debug(line)
		case bytes.HasPrefix(line, []byte("DEBUG|")):
			d.open, d.held = bytes.Contains(line, []byte("ignoring ./")) && !recordEnds(line), len(line)
			d.Debug(line)
		default:
			d.Rest.Write(d.buf[:i+1])
		}
		d.buf = d.buf[i+1:]
	}
	if len(d.buf) > maxRecordBytes*2 {
		d.Rest.Write(d.buf)
		d.buf = d.buf[:0]
	}
	return len(p), nil
}

// recordEnds reports whether a line of a debug record holds the rule text
// that ends it.
func recordEnds(line []byte) bool {
	return bytes.Contains(line, []byte(": Ignore(")) || bytes.Contains(line, []byte(SubjectMark))
}

// lossy is p as rg prints a path that is not UTF-8: each invalid byte
// replaced by U+FFFD.
func lossy(p string) string {
	if utf8.ValidString(p) {
		return p
	}
	var b strings.Builder
	for _, r := range p {
		b.WriteRune(r)
	}
	return b.String()
}
