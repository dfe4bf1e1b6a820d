// Package textedit holds the pure text rules of the edit tools: how a
// file's line endings are judged and how text typed with "\n" is made to
// match a file written with "\r\n". It is pure and trusts nothing it is
// given.
package textedit

import (
	"bytes"
	"context"
)

// Endings counts the line endings of data: crlf "\r\n" and lf a "\n" not
// preceded by "\r".
func Endings(data []byte) (crlf, lf int) {
	n := bytes.Count(data, []byte{'\n'})
	crlf = bytes.Count(data, []byte("\r\n"))
	return crlf, n - crlf
}

// AllCRLF reports whether data ends its lines with "\r\n" throughout
// (and has at least one line ending).
func AllCRLF(data []byte) bool {
	crlf, lf := Endings(data)
	return crlf > 0 && lf == 0
}

// CRLF returns b with each "\n" not already preceded by "\r" written as
// "\r\n".
func CRLF(b []byte) []byte {
	_, lf := Endings(b)
	if lf == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+lf)
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, c)
	}
	return out
}

// Lines joins lines, each ended by eol.
func Lines(lines []string, eol string) []byte {
	n := 0
	for _, l := range lines {
		n += len(l) + len(eol)
	}
	out := make([]byte, 0, n)
	for _, l := range lines {
		out = append(append(out, l...), eol...)
	}
	return out
}

// CtxEvery and CtxEveryMatch are how many bytes, or matches, a loop over
// content handles between checks of its context: each well under a
// millisecond of work.
const (
	CtxEvery      = 1 << 20
	CtxEveryMatch = 1 << 10
)

// CountMatches counts the non-overlapping occurrences of old in data, as
// bytes.Count does, checking ctx every CtxEvery bytes or CtxEveryMatch
// matches.
func CountMatches(ctx context.Context, data, old []byte) (int64, error) {
	var n int64
	for len(data) > 0 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// A chunk overlaps the next by len(old)-1, so no match is split;
		// a match is counted in the chunk where it starts.
		end := min(len(data), CtxEvery+len(old)-1)
		chunk := data[:end]
		pos := 0
		for {
			i := bytes.Index(chunk[pos:], old)
			if i < 0 || pos+i >= CtxEvery {
				break
			}
			n++
			pos += i + len(old)
			if n%CtxEveryMatch == 0 {
				if err := ctx.Err(); err != nil {
					return 0, err
				}
			}
		}
		// Continue after the last match, or at the chunk's end.
		data = data[max(pos, min(CtxEvery, len(data))):]
	}
	return n, nil
}

// ReplaceAll is bytes.ReplaceAll into a buffer of the size the caller
// computed, checking ctx every CtxEvery bytes or CtxEveryMatch matches.
func ReplaceAll(ctx context.Context, data, old, repl []byte, size int64) ([]byte, error) {
	out := make([]byte, 0, size)
	scanned, matched := 0, 0
	for {
		if scanned >= CtxEvery || matched >= CtxEveryMatch {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			scanned, matched = 0, 0
		}
		matched++
		i := bytes.Index(data, old)
		if i < 0 {
			return append(out, data...), nil
		}
		out = append(append(out, data[:i]...), repl...)
		data = data[i+len(old):]
		scanned += i + len(old)
	}
}
