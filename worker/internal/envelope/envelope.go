// Package envelope parses the "*** Begin Patch" envelope of Codex's
// apply_patch, the edit format GPT-family models are trained to write. It
// is pure: it reads the patch text and trusts none of it; the worker
// resolves the paths, checks preconditions and applies the changes. It
// does not judge whether a change can apply: context is matched against
// the file by the worker.
//
// The grammar (a line's trailing "\r" is the patch's own line ending and
// is dropped; blank lines before "*** Begin Patch" and after
// "*** End Patch" are ignored):
//
//	patch   = "*** Begin Patch" NL { file } "*** End Patch" [NL]
//	file    = add | delete | update
//	add     = "*** Add File: " path NL { "+" text NL }
//	delete  = "*** Delete File: " path NL
//	update  = "*** Update File: " path NL [ "*** Move to: " path NL ] { chunk }
//	chunk   = { anchor } line { line } [ "*** End of File" NL ]
//	anchor  = "@@" [ " " text ] NL
//	line    = ( " " | "-" | "+" ) text NL | NL
//
// An empty line inside a chunk is an empty context line, as models write
// one; blank lines just before a file section or the end separate, and
// are no part of a chunk or an added file. The first chunk of an update may start without "@@"; every later
// one starts with at least one. An update with no chunk must move the
// file. Paths are trimmed of surrounding spaces and tabs.
package envelope

import (
	"bytes"
	"fmt"
	"strings"
)

// Begin is the first line of an envelope.
const Begin = "*** Begin Patch"

const (
	end       = "*** End Patch"
	addFile   = "*** Add File: "
	delFile   = "*** Delete File: "
	updFile   = "*** Update File: "
	moveTo    = "*** Move to: "
	endOfFile = "*** End of File"
)

// Op is what a file section does.
type Op int

const (
	// Add creates a file holding the section's lines.
	Add Op = iota + 1
	// Delete removes a file, whatever it holds.
	Delete
	// Update changes a file by its chunks, and with MoveTo renames it.
	Update
)

// File is one file section.
type File struct {
	Op   Op
	Path string
	// MoveTo is the new path of an update that renames the file.
	MoveTo string
	// Lines are an added file's lines, without line endings.
	Lines []string
	// Chunks are an update's changes, in the order of the file.
	Chunks []Chunk
	// Line is the section header's line number in the patch.
	Line int
}

// Chunk is one change of an update: old lines (context and removed)
// replaced by new lines (context and added), all without line endings.
type Chunk struct {
	// Anchors are the texts of the chunk's "@@" lines, in order; "" for
	// a bare "@@".
	Anchors []string
	Old     []string
	New     []string
	// EOF: the old lines must end at the end of the file.
	EOF bool
	// Line is the chunk's first line number in the patch.
	Line int
}

// Error is a malformed envelope: what is wrong and the line of the patch
// (1-based) where it was found.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Is reports whether b is an envelope: its first line that is not blank
// is "*** Begin Patch".
func Is(b []byte) bool {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if t := strings.TrimSpace(string(line)); t != "" {
			return t == Begin
		}
	}
	return false
}

// Parse parses an envelope into its file sections, in the order it gives
// them.
func Parse(b []byte) ([]File, error) {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	first, last := 0, len(lines)-1
	for first <= last && strings.TrimSpace(lines[first]) == "" {
		first++
	}
	for last >= first && strings.TrimSpace(lines[last]) == "" {
		last--
	}
	if first > last || strings.TrimSpace(lines[first]) != Begin {
		return nil, &Error{Line: first + 1, Msg: "the patch must start with " + quote(Begin)}
	}
	if last == first || strings.TrimSpace(lines[last]) != end {
		return nil, &Error{Line: last + 1, Msg: "the patch must end with " + quote(end)}
	}
	p := &parser{lines: lines[:last], i: first + 1}
	var files []File
	for p.i < len(p.lines) {
		if strings.TrimSpace(p.lines[p.i]) == "" {
			p.i++
			continue
		}
		f, err := p.file()
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, &Error{Line: last + 1, Msg: "the patch names no file (want *** Add File:, *** Delete File: or *** Update File: sections)"}
	}
	return files, nil
}

type parser struct {
	lines []string
	i     int // the next line to read, 0-based
	// runEnd ends the run of blank lines last scanned; runTrailing: a
	// file section or the end follows it.
	runEnd      int
	runTrailing bool
}

func (p *parser) errorf(format string, args ...any) error {
	return &Error{Line: p.i + 1, Msg: fmt.Sprintf(format, args...)}
}

// header reports whether line starts a file section or ends the patch.
func header(line string) bool {
	return strings.HasPrefix(line, addFile) || strings.HasPrefix(line, delFile) || strings.HasPrefix(line, updFile)
}

// path is the path after prefix on the current line.
func (p *parser) path(prefix string) (string, error) {
	name := strings.Trim(strings.TrimPrefix(p.lines[p.i], prefix), " \t")
	if name == "" {
		return "", p.errorf("%s names no path", quote(strings.TrimSpace(prefix)))
	}
	return name, nil
}

// trailingBlank reports whether the current line and all up to the next
// file section (or the end) are blank: they separate sections, and are
// no empty context or added lines.
// A run of blank lines is scanned once (runEnd, runTrailing), so parsing
// stays linear in the patch.
func (p *parser) trailingBlank() bool {
	if strings.TrimSpace(p.lines[p.i]) != "" {
		return false
	}
	if p.i >= p.runEnd {
		j := p.i
		for j < len(p.lines) && !header(p.lines[j]) && strings.TrimSpace(p.lines[j]) == "" {
			j++
		}
		p.runEnd, p.runTrailing = j, j == len(p.lines) || header(p.lines[j])
	}
	return p.runTrailing
}

func (p *parser) file() (File, error) {
	line := p.lines[p.i]
	f := File{Line: p.i + 1}
	var err error
	switch {
	case strings.HasPrefix(line, addFile):
		f.Op = Add
		if f.Path, err = p.path(addFile); err != nil {
			return f, err
		}
		f.Lines = []string{}
		for p.i++; p.i < len(p.lines) && !header(p.lines[p.i]); p.i++ {
			if p.trailingBlank() {
				break
			}
			text, ok := strings.CutPrefix(p.lines[p.i], "+")
			if !ok {
				return f, p.errorf("in %s every line starts with \"+\"; got %s", quote(addFile+f.Path), quote(p.lines[p.i]))
			}
			f.Lines = append(f.Lines, text)
		}
		return f, nil
	case strings.HasPrefix(line, delFile):
		f.Op = Delete
		if f.Path, err = p.path(delFile); err != nil {
			return f, err
		}
		for p.i++; p.i < len(p.lines) && !header(p.lines[p.i]); p.i++ {
			if strings.TrimSpace(p.lines[p.i]) != "" {
				return f, p.errorf("nothing may follow %s; got %s", quote(delFile+f.Path), quote(p.lines[p.i]))
			}
		}
		return f, nil
	case strings.HasPrefix(line, updFile):
		f.Op = Update
		if f.Path, err = p.path(updFile); err != nil {
			return f, err
		}
		p.i++
		if p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], moveTo) {
			if f.MoveTo, err = p.path(moveTo); err != nil {
				return f, err
			}
			p.i++
		}
		if f.Chunks, err = p.chunks(); err != nil {
			return f, err
		}
		if len(f.Chunks) == 0 && f.MoveTo == "" {
			return f, &Error{Line: f.Line, Msg: fmt.Sprintf("%s changes nothing: give @@ chunks or *** Move to:", quote(updFile+f.Path))}
		}
		return f, nil
	case line == strings.TrimSpace(addFile) || line == strings.TrimSpace(delFile) || line == strings.TrimSpace(updFile):
		return f, p.errorf("%s names no path", quote(line))
	}
	return f, p.errorf("%s is not a file section; want *** Add File: PATH, *** Delete File: PATH or *** Update File: PATH", quote(line))
}

// chunks reads an update's chunks up to the next file section.
func (p *parser) chunks() ([]Chunk, error) {
	var chunks []Chunk
	var c *Chunk
	// lines: c has a change line; closed: c ended with End of File.
	lines, closed := false, false
	flush := func() error {
		if c == nil {
			return nil
		}
		if !lines {
			return &Error{Line: c.Line, Msg: "an @@ chunk has no lines (want lines starting with \" \", \"-\" or \"+\")"}
		}
		chunks = append(chunks, *c)
		c, lines, closed = nil, false, false
		return nil
	}
	for ; p.i < len(p.lines) && !header(p.lines[p.i]); p.i++ {
		if p.trailingBlank() {
			break
		}
		line := p.lines[p.i]
		switch {
		case line == "@@" || strings.HasPrefix(line, "@@ "):
			if lines {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			if c == nil {
				c = &Chunk{Line: p.i + 1}
			}
			c.Anchors = append(c.Anchors, strings.TrimPrefix(strings.TrimPrefix(line, "@@"), " "))
			continue
		case strings.TrimSpace(line) == endOfFile:
			if !lines || closed {
				return nil, p.errorf("%s must end a chunk's lines", quote(endOfFile))
			}
			c.EOF, closed = true, true
			continue
		case strings.HasPrefix(line, "***"):
			return nil, p.errorf("%s is not a marker of an update (want *** Move to: right after *** Update File:, or *** End of File after a chunk's lines)", quote(line))
		}
		if closed {
			return nil, p.errorf("a chunk ended by %s is followed by %s; start the next chunk with @@", quote(endOfFile), quote(line))
		}
		if c == nil {
			if len(chunks) > 0 {
				return nil, p.errorf("a chunk after the first must start with @@; got %s", quote(line))
			}
			c = &Chunk{Line: p.i + 1}
		}
		kind, text := byte(' '), ""
		if line != "" {
			kind, text = line[0], line[1:]
		}
		switch kind {
		case ' ':
			c.Old, c.New = append(c.Old, text), append(c.New, text)
		case '-':
			c.Old = append(c.Old, text)
		case '+':
			c.New = append(c.New, text)
		default:
			return nil, p.errorf("a chunk line starts with \" \" (context), \"-\" (removed) or \"+\" (added); got %s", quote(line))
		}
		lines = true
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return chunks, nil
}

// quote quotes s for a message, cut to 80 bytes.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return fmt.Sprintf("%q", s)
}
