// Package rulesfile reads the operator's --rules file: its lines, parsed
// and read again when the file changes, either in this process (Open) or
// through a reader process confined to the file's directory (Start,
// ReaderMain). Judging a call's paths by them is the worker's (its Check
// and its resolver); this package knows no call and no root.
package rulesfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

// File is the operator's --rules file: ordered lines
//
//	allow|deny|ask TOOL PATH-GLOB
//
// where TOOL is a tool name without --tools-prefix, or a pattern of
// path.Match ("*", "fs_*"), and PATH-GLOB is the policy's glob
// (sandbox.CompileGlob, the syntax of --protect and --deny:
// root-relative bytes, "**" across components, anchored with a leading
// "/", a directory covering what lies beneath it). Blank lines and lines
// starting with "#" are skipped. For each path of a call, the first line
// that matches the tool and the path wins.
//
// The file is read again when its identity or times change (an atomic
// replace makes a new inode, an edit in place moves mtime and ctime):
// each Check, and each call and each command as it starts, asks for its
// version, and the call judges by that version throughout. A
// file that fails to parse at start stops the worker; a bad edit later
// keeps the rules in force and is logged once. The worker itself does not
// read the file: a reader process does (reader.go), so that the worker,
// which faces the agent, needs no Landlock grant beside it.
//
// The worker's Check judges before the call; the call carries what Check
// judged, and the worker's resolver judges the rules again on each name
// the call resolves (worker/callrules.go), so a rename between the two
// cannot take the call somewhere the rules did not judge.
//
// A deny line also hides content from the tools it names exactly as
// --deny does (LinesFor): a call judges content by the policy with its
// tool's lines, wherever the worker judges --deny, and the command
// runner, which reads the file through a reader of its own, gives each
// command its tool's lines, which the shim leaves out of the command's
// Landlock rules as it leaves out --deny.
type File struct {
	mu    sync.Mutex
	src   source
	rules []Rule
	// bad is the stamp of the last version that failed to load (zero
	// when the file was gone), reported once.
	bad      Stamp
	reported bool
}

// Rule is one line of the file.
type Rule struct {
	Action fsmcpv1.RuleAction
	// Line is the line's number in the file, from 1, and Text the line.
	Line int
	Text string
	tool string
	glob sandbox.Glob
	// label names the line in refusals of content (LinesFor).
	label string
}

// Stamp tells one version of a file from another: its identity, size and
// times.
type Stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

// maxRulesBytes bounds the rules file.
const maxRulesBytes = 1 << 20

// source gives the rules file's text when its version differs from the
// last one it gave.
type source interface {
	// poll returns the file's bytes and stamp and changed, or changed
	// false when the version is the one it last returned; err when the
	// file cannot be read (the stamp then says which version, zero when
	// it is gone).
	poll() (data []byte, stamp Stamp, changed bool, err error)
}

// dirSource reads the file name in the open directory dir.
type dirSource struct {
	dir  *os.File
	name string
	last Stamp
}

func (d *dirSource) poll() ([]byte, Stamp, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.dir.Fd()), d.name, &st, 0); err != nil {
		return nil, Stamp{}, false, err
	}
	if StampOf(&st) == d.last {
		return nil, d.last, false, nil
	}
	data, stamp, err := d.load()
	if err != nil {
		return nil, stamp, false, err
	}
	d.last = stamp
	return data, stamp, true, nil
}

// StampOf is the stamp of the file st describes.
func StampOf(st *unix.Stat_t) Stamp {
	return Stamp{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}
}

// load reads the file, with the stamp of what it read.
func (d *dirSource) load() ([]byte, Stamp, error) {
	fd, err := unix.Openat(int(d.dir.Fd()), d.name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, Stamp{}, err
	}
	f := os.NewFile(uintptr(fd), d.name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, Stamp{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, StampOf(&st), errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRulesBytes+1))
	if err != nil {
		return nil, StampOf(&st), err
	}
	if len(data) > maxRulesBytes {
		return nil, StampOf(&st), fmt.Errorf("larger than %d bytes", maxRulesBytes)
	}
	return data, StampOf(&st), nil
}

// openDir opens the directory of file (an absolute path), O_PATH,
// and returns it with the file's name.
func openDir(file string) (*os.File, string, error) {
	dir, name := path.Split(file)
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", fmt.Errorf("--rules: %w", err)
	}
	return d, name, nil
}

// Open reads the rules file at file (an absolute path) in this process
// and keeps its directory open to read it again. It fails on a file that
// does not parse. The worker and the command runner use Start instead.
func Open(file string) (*File, error) {
	d, name, err := openDir(file)
	if err != nil {
		return nil, err
	}
	r, err := newFile(&dirSource{dir: d, name: name})
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("--rules %s: %w", file, err)
	}
	return r, nil
}

// newFile reads the first version from src; it must parse.
func newFile(src source) (*File, error) {
	data, _, _, err := src.poll()
	if err != nil {
		return nil, err
	}
	rules, err := parse(data)
	if err != nil {
		return nil, err
	}
	return &File{src: src, rules: rules}, nil
}

// Current returns the rules in force, reading the file again first if it
// changed. A file that is gone or does not parse leaves the rules as they
// were, and says why on stderr once per version.
func (r *File) Current() []Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, stamp, changed, err := r.src.poll()
	if err == nil && !changed {
		return r.rules
	}
	var rules []Rule
	if err == nil {
		rules, err = parse(data)
	}
	if err != nil {
		// stamp is zero when the file is gone: reported once until it
		// is back.
		if !r.reported || stamp != r.bad {
			fmt.Fprintf(os.Stderr, "fsmcp worker: --rules: keeping the previous rules: %v\n", err)
		}
		r.bad, r.reported = stamp, true
		return r.rules
	}
	r.rules, r.bad, r.reported = rules, Stamp{}, false
	fmt.Fprintf(os.Stderr, "fsmcp worker: --rules: read %d rules again\n", len(rules))
	return rules
}

// parse parses the file's lines; an error names the first bad line.
func parse(data []byte) ([]Rule, error) {
	var rules []Rule
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxRulesBytes)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		r, err := parseRule(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		r.Line = n
		r.label = fmt.Sprintf("--rules line %d: %s", n, text)
		rules = append(rules, r)
	}
	return rules, sc.Err()
}

var actions = map[string]fsmcpv1.RuleAction{
	"allow": fsmcpv1.RuleAction_RULE_ACTION_ALLOW,
	"deny":  fsmcpv1.RuleAction_RULE_ACTION_DENY,
	"ask":   fsmcpv1.RuleAction_RULE_ACTION_ASK,
}

// parseRule parses "ACTION TOOL GLOB"; the glob is the rest of the line,
// so it may hold spaces.
func parseRule(text string) (Rule, error) {
	action, rest, _ := strings.Cut(text, " ")
	a, ok := actions[action]
	if !ok {
		return Rule{}, fmt.Errorf("%q: a rule starts with allow, deny or ask", action)
	}
	tool, glob, _ := strings.Cut(strings.TrimSpace(rest), " ")
	glob = strings.TrimSpace(glob)
	if tool == "" || glob == "" {
		return Rule{}, errors.New("want: allow|deny|ask TOOL PATH-GLOB")
	}
	if _, err := path.Match(tool, ""); err != nil {
		return Rule{}, fmt.Errorf("tool %q: not a valid pattern", tool)
	}
	g, err := sandbox.CompileGlob(glob)
	if err != nil {
		return Rule{}, fmt.Errorf("glob %q: %w", glob, err)
	}
	return Rule{Action: a, Text: text, tool: tool, glob: g}, nil
}

// First returns the first rule for tool that matches rel or an ancestor.
func First(rules []Rule, tool, rel string) (Rule, bool) {
	for _, r := range rules {
		if ok, _ := path.Match(r.tool, tool); !ok {
			continue
		}
		if r.glob.Match(rel) {
			return r, true
		}
	}
	return Rule{}, false
}

// LinesFor are the rules for tool as the policy's content lines: a deny
// line hides what it matches from tool exactly as --deny does, in every
// way tool shows content (sandbox.RuleLine).
func LinesFor(rules []Rule, tool string) []sandbox.RuleLine {
	var lines []sandbox.RuleLine
	for _, r := range rules {
		if ok, _ := path.Match(r.tool, tool); ok {
			lines = append(lines, sandbox.RuleLine{Deny: r.Action == fsmcpv1.RuleAction_RULE_ACTION_DENY, Glob: r.glob, Label: r.label})
		}
	}
	return lines
}

// Lines are the rules in force for tool as the policy's content lines,
// reading the file again first if it changed. The command runner gives
// them to each command as it starts.
func (r *File) Lines(tool string) []sandbox.RuleLine { return LinesFor(r.Current(), tool) }

// AnyDeny reports whether a deny line of the rules last read, for any
// tool, matches rel. It does not ask for a newer version: a listing meets
// many names (a pnpm store is hard links throughout), and each call
// starts by asking.
func (r *File) AnyDeny(rel string) bool {
	r.mu.Lock()
	rules := r.rules
	r.mu.Unlock()
	for _, l := range rules {
		if l.Action == fsmcpv1.RuleAction_RULE_ACTION_DENY && l.glob.Match(rel) {
			return true
		}
	}
	return false
}
