// Package gitconfig parses git's configuration file syntax, as git's
// config.c does, without running anything: sections and subsections
// ("[core]", "[includeIf \"gitdir:x/\"]", the old "[section.sub]"),
// quoting, the escapes \\ \" \n \t \b, continuation lines, comments and
// valueless variables. It returns the variables in file order; following
// include.path is the caller's, which knows where files may be read.
//
// It is strict where git is: a line git refuses is an error, so that a
// file this package reads is one git would read the same way.
package gitconfig

import (
	"bytes"
	"fmt"
	"strings"
)

// Var is one variable assignment.
type Var struct {
	// Key is "section.name" or "section.subsection.name": the section
	// and name lower-cased (git compares them without case), a quoted
	// subsection verbatim.
	Key string
	// Value is the unquoted, unescaped value; "" with NoValue for a
	// variable written without "=" (a boolean true).
	Value   string
	NoValue bool
	// Line is the 1-based line the variable starts on.
	Line int
}

// Section is the key's first component; "" for a variable written
// before any section header, whose key is its name alone.
func (v Var) Section() string {
	i := strings.IndexByte(v.Key, '.')
	if i < 0 {
		return ""
	}
	return v.Key[:i]
}

// Name is the key's last component.
func (v Var) Name() string { return v.Key[strings.LastIndexByte(v.Key, '.')+1:] }

// Subsection is what lies between the key's section and name, "" when
// nothing does.
func (v Var) Subsection() string {
	i, j := strings.IndexByte(v.Key, '.'), strings.LastIndexByte(v.Key, '.')
	if i == j {
		return ""
	}
	return v.Key[i+1 : j]
}

// Error is a line git would refuse.
type Error struct {
	Line   int
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// parser reads one file, one character at a time, as git's
// get_next_char does: "\r\n" is "\n", and the end of the file is a final
// "\n" once.
type parser struct {
	data []byte
	pos  int
	line int
	eof  bool
	base []byte // the current section key, with a trailing "."
}

const eofChar = -1

func (p *parser) next() int {
	if p.pos >= len(p.data) {
		if p.eof {
			return eofChar
		}
		p.eof = true
		return '\n'
	}
	c := p.data[p.pos]
	p.pos++
	if c == '\r' && p.pos < len(p.data) && p.data[p.pos] == '\n' {
		c = '\n'
		p.pos++
	}
	if c == '\n' {
		p.line++
	}
	return int(c)
}

func (p *parser) fail(format string, args ...any) error {
	return &Error{Line: p.line + 1, Reason: fmt.Sprintf(format, args...)}
}

// Parse returns the variables of one configuration file.
func Parse(data []byte) ([]Var, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, &Error{Line: 1 + bytes.Count(data[:bytes.IndexByte(data, 0)], []byte("\n")), Reason: "NUL byte"}
	}
	p := &parser{data: data}
	var vars []Var
	comment := false
	for {
		c := p.next()
		switch {
		case c == eofChar:
			return vars, nil
		case c == '\n':
			comment = false
		case comment || isSpace(c):
		case c == '#' || c == ';':
			comment = true
		case c == '[':
			if err := p.section(); err != nil {
				return nil, err
			}
		case !isAlpha(c):
			return nil, p.fail("a variable name must start with a letter")
		default:
			v, err := p.variable(c)
			if err != nil {
				return nil, err
			}
			vars = append(vars, v)
		}
	}
}

// section reads a header after its "[".
func (p *parser) section() error {
	p.base = p.base[:0]
	for {
		c := p.next()
		switch {
		case c == eofChar || c == '\n':
			return p.fail("unterminated section header")
		case c == ']':
			if len(p.base) == 0 {
				return p.fail("empty section name")
			}
			p.base = append(p.base, '.')
			return nil
		case isSpace(c):
			return p.subsection()
		case !isKeyChar(c) && c != '.':
			return p.fail("invalid character %q in a section name", rune(c))
		default:
			p.base = append(p.base, toLower(byte(c)))
		}
	}
}

// subsection reads ` "name"]` after a section name and a space.
func (p *parser) subsection() error {
	c := p.next()
	for isSpace(c) {
		c = p.next()
	}
	if c != '"' {
		return p.fail("a subsection must be quoted")
	}
	p.base = append(p.base, '.')
	for {
		c = p.next()
		switch c {
		case eofChar, '\n':
			return p.fail("unterminated subsection")
		case '"':
			if p.next() != ']' {
				return p.fail("a subsection header must end in \"]")
			}
			p.base = append(p.base, '.')
			return nil
		case '\\':
			c = p.next()
			if c == eofChar || c == '\n' {
				return p.fail("unterminated subsection")
			}
		}
		p.base = append(p.base, byte(c))
	}
}

// variable reads a variable whose name starts with c.
func (p *parser) variable(c int) (Var, error) {
	v := Var{Line: p.line + 1}
	name := []byte{toLower(byte(c))}
	for {
		c = p.next()
		if c == eofChar || !isKeyChar(c) {
			break
		}
		name = append(name, toLower(byte(c)))
	}
	v.Key = string(p.base) + string(name)
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	switch c {
	case '\n', eofChar:
		v.NoValue = true
		return v, nil
	case '=':
		val, err := p.value()
		v.Value = val
		return v, err
	}
	return v, p.fail("invalid character %q after the variable name %q", rune(c), name)
}

// value reads a value after its "=", to the end of its line.
func (p *parser) value() (string, error) {
	var out []byte
	quote, comment, space := false, false, 0
	for {
		c := p.next()
		if c == '\n' || c == eofChar {
			if quote {
				return "", p.fail("unterminated quoted value")
			}
			return string(out), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			if len(out) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			out = append(out, ' ')
		}
		switch c {
		case '\\':
			switch c = p.next(); c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", p.fail("unknown escape in a value")
			}
		case '"':
			quote = !quote
			continue
		}
		out = append(out, byte(c))
	}
}

// isSpace is git's isspace (sane_ctype): space, tab, newline and
// carriage return only.
func isSpace(c int) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isAlpha(c int) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isKeyChar(c int) bool { return isAlpha(c) || c >= '0' && c <= '9' || c == '-' }

func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
