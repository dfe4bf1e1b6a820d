// Package nomatch finds where text that an edit expected, and that does not
// occur in a file, almost occurs, to say so in the no_match error. It only
// reports: nothing it finds is ever applied.
package nomatch

import (
	"bytes"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// maxNearestBytes bounds the file nearest searches: each normalisation
// keeps a 4-byte offset per byte of it.
const maxNearestBytes = 8 << 20

// minNearestPrefix is the shortest prefix of the text worth reporting as a
// partial match.
const minNearestPrefix = 8

// normalisation is one way text that does not match may still almost
// match: it returns the normalised bytes and, for each, its offset in b.
type normalisation struct {
	name string
	fn   func(b []byte) ([]byte, []int32)
}

var normalisations = []normalisation{
	{"line_endings", func(b []byte) ([]byte, []int32) { return normalise(b, false, false, true) }},
	{"whitespace", func(b []byte) ([]byte, []int32) { return normalise(b, true, false, true) }},
	{"case", func(b []byte) ([]byte, []int32) { return normalise(b, false, true, false) }},
	{"whitespace_and_case", func(b []byte) ([]byte, []int32) { return normalise(b, true, true, true) }},
}

// normalise maps b: with ws, every run of ASCII white space becomes one
// space; with lower, ASCII letters are lower-cased; with crlf, a \r before
// \n is dropped. Only ASCII is touched, so the mapping stays byte for byte.
func normalise(b []byte, ws, lower, crlf bool) ([]byte, []int32) {
	out := make([]byte, 0, len(b))
	at := make([]int32, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case ws && isSpace(c):
			start := i
			for i+1 < len(b) && isSpace(b[i+1]) {
				i++
			}
			out, at = append(out, ' '), append(at, int32(start))
			continue
		case crlf && c == '\r' && i+1 < len(b) && b[i+1] == '\n':
			continue
		case lower && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		out, at = append(out, c), append(at, int32(i))
	}
	return out, at
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// Find finds where text, which does not occur in data, almost occurs:
// the first place it matches once line endings, white space or ASCII case
// are disregarded (in that order); failing that, the place where the
// longest prefix of it occurs. It returns nil when nothing resembles it.
// It only reports: nothing it finds is ever applied.
func Find(data, text []byte) *fsmcpv1.Nearest {
	if len(text) == 0 || len(data) > maxNearestBytes {
		return nil
	}
	for _, n := range normalisations {
		nd, at := n.fn(data)
		nt, _ := n.fn(text)
		if len(nt) == 0 {
			continue
		}
		if i := bytes.Index(nd, nt); i >= 0 {
			off := int(at[i])
			// A candidate that starts with a run of white space starts
			// on the line of its first other byte, at that line's
			// indentation.
			if nt[0] == ' ' && nd[i] == ' ' && i+1 < len(at) && len(nt) > 1 {
				off = int(at[i+1])
				for off > 0 && (data[off-1] == ' ' || data[off-1] == '\t') {
					off--
				}
			}
			return locate(data, off, n.name, 0)
		}
	}
	// The longest prefix that occurs: occurrence is monotone in the length.
	lo, hi := 0, len(text)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if bytes.Contains(data, text[:mid]) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < minNearestPrefix && lo < len(text)/2 {
		return nil
	}
	return locate(data, bytes.Index(data, text[:lo]), "content", lo)
}

func locate(data []byte, off int, differs string, matched int) *fsmcpv1.Nearest {
	return &fsmcpv1.Nearest{LineNumber: int64(bytes.Count(data[:off], []byte("\n"))) + 1, Offset: int64(off),
		Differs: differs, MatchedBytes: int64(matched)}
}

// Describe is what the no_match message adds about n: where the text, or
// its first bytes, occur.
func Describe(n *fsmcpv1.Nearest) string {
	if n.Differs == "content" {
		return fmt.Sprintf("; its first %d bytes occur at line %d (offset %d), the rest differs", n.MatchedBytes, n.LineNumber, n.Offset)
	}
	return fmt.Sprintf("; it almost occurs at line %d (offset %d), differing only in %s", n.LineNumber, n.Offset, describeDiffers(n.Differs))
}

func describeDiffers(d string) string {
	switch d {
	case "line_endings":
		return "line endings"
	case "whitespace_and_case":
		return "white space and case"
	case "whitespace":
		return "white space"
	}
	return d
}
