// Package textedit holds the pure text rules of the edit tools: how a
// file's line endings are judged and how text typed with "\n" is made to
// match a file written with "\r\n". It is pure and trusts nothing it is
// given.
package textedit

import "bytes"

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
