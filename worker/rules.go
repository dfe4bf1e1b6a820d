package worker

import (
	"bufio"
	"bytes"
	"context"
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

// Rules are the operator's --rules file: ordered lines
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
// read the file: a reader process does (rulesreader.go), so that the
// worker, which faces the agent, needs no Landlock grant beside it.
//
// Check judges before the call; the call carries what Check judged, and
// the resolver judges the rules again on each name the call resolves
// (callrules.go), so a rename between the two cannot take the call
// somewhere the rules did not judge.
//
// A deny line also hides content from the tools it names exactly as
// --deny does (linesFor): a call judges content by the policy with its
// tool's lines (policyOf), wherever the worker judges --deny, and the
// command runner, which reads the file through a reader of its own, gives
// each command its tool's lines, which the shim leaves out of the
// command's Landlock rules as it leaves out --deny.
type Rules struct {
	mu    sync.Mutex
	src   rulesSource
	rules []rule
	// bad is the stamp of the last version that failed to load (zero
	// when the file was gone), reported once.
	bad      fileStamp
	reported bool
}

type rule struct {
	action fsmcpv1.RuleAction
	tool   string
	glob   sandbox.Glob
	line   int
	text   string
	// label names the line in refusals of content (linesFor).
	label string
}

// fileStamp tells one version of the rules file from another.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

// maxRulesBytes bounds the rules file.
const maxRulesBytes = 1 << 20

// rulesSource gives the rules file's text when its version differs from
// the last one it gave.
type rulesSource interface {
	// poll returns the file's bytes and stamp and changed, or changed
	// false when the version is the one it last returned; err when the
	// file cannot be read (the stamp then says which version, zero when
	// it is gone).
	poll() (data []byte, stamp fileStamp, changed bool, err error)
}

// dirSource reads the file name in the open directory dir.
type dirSource struct {
	dir  *os.File
	name string
	last fileStamp
}

func (d *dirSource) poll() ([]byte, fileStamp, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.dir.Fd()), d.name, &st, 0); err != nil {
		return nil, fileStamp{}, false, err
	}
	if stampOf(&st) == d.last {
		return nil, d.last, false, nil
	}
	data, stamp, err := d.load()
	if err != nil {
		return nil, stamp, false, err
	}
	d.last = stamp
	return data, stamp, true, nil
}

func stampOf(st *unix.Stat_t) fileStamp {
	return fileStamp{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}
}

// load reads the file, with the stamp of what it read.
func (d *dirSource) load() ([]byte, fileStamp, error) {
	fd, err := unix.Openat(int(d.dir.Fd()), d.name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fileStamp{}, err
	}
	f := os.NewFile(uintptr(fd), d.name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fileStamp{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, stampOf(&st), errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRulesBytes+1))
	if err != nil {
		return nil, stampOf(&st), err
	}
	if len(data) > maxRulesBytes {
		return nil, stampOf(&st), fmt.Errorf("larger than %d bytes", maxRulesBytes)
	}
	return data, stampOf(&st), nil
}

// openRulesDir opens the directory of file (an absolute path), O_PATH,
// and returns it with the file's name.
func openRulesDir(file string) (*os.File, string, error) {
	dir, name := path.Split(file)
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", fmt.Errorf("--rules: %w", err)
	}
	return d, name, nil
}

// OpenRules reads the rules file at file (an absolute path) in this
// process and keeps its directory open to read it again. It fails on a
// file that does not parse. The worker uses StartRules instead.
func OpenRules(file string) (*Rules, error) {
	d, name, err := openRulesDir(file)
	if err != nil {
		return nil, err
	}
	r, err := newRules(&dirSource{dir: d, name: name})
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("--rules %s: %w", file, err)
	}
	return r, nil
}

// newRules reads the first version from src; it must parse.
func newRules(src rulesSource) (*Rules, error) {
	data, _, _, err := src.poll()
	if err != nil {
		return nil, err
	}
	rules, err := parseRules(data)
	if err != nil {
		return nil, err
	}
	return &Rules{src: src, rules: rules}, nil
}

// current returns the rules in force, reading the file again first if it
// changed. A file that is gone or does not parse leaves the rules as they
// were, and says why on stderr once per version.
func (r *Rules) current() []rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, stamp, changed, err := r.src.poll()
	if err == nil && !changed {
		return r.rules
	}
	var rules []rule
	if err == nil {
		rules, err = parseRules(data)
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
	r.rules, r.bad, r.reported = rules, fileStamp{}, false
	fmt.Fprintf(os.Stderr, "fsmcp worker: --rules: read %d rules again\n", len(rules))
	return rules
}

// parseRules parses the file's lines; an error names the first bad line.
func parseRules(data []byte) ([]rule, error) {
	var rules []rule
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
		r.line = n
		r.label = fmt.Sprintf("--rules line %d: %s", n, text)
		rules = append(rules, r)
	}
	return rules, sc.Err()
}

var ruleActions = map[string]fsmcpv1.RuleAction{
	"allow": fsmcpv1.RuleAction_RULE_ACTION_ALLOW,
	"deny":  fsmcpv1.RuleAction_RULE_ACTION_DENY,
	"ask":   fsmcpv1.RuleAction_RULE_ACTION_ASK,
}

// parseRule parses "ACTION TOOL GLOB"; the glob is the rest of the line,
// so it may hold spaces.
func parseRule(text string) (rule, error) {
	action, rest, _ := strings.Cut(text, " ")
	a, ok := ruleActions[action]
	if !ok {
		return rule{}, fmt.Errorf("%q: a rule starts with allow, deny or ask", action)
	}
	tool, glob, _ := strings.Cut(strings.TrimSpace(rest), " ")
	glob = strings.TrimSpace(glob)
	if tool == "" || glob == "" {
		return rule{}, errors.New("want: allow|deny|ask TOOL PATH-GLOB")
	}
	if _, err := path.Match(tool, ""); err != nil {
		return rule{}, fmt.Errorf("tool %q: not a valid pattern", tool)
	}
	g, err := sandbox.CompileGlob(glob)
	if err != nil {
		return rule{}, fmt.Errorf("glob %q: %w", glob, err)
	}
	return rule{action: a, tool: tool, glob: g, text: text}, nil
}

// first returns the first rule for tool that matches rel or an ancestor.
func first(rules []rule, tool, rel string) (rule, bool) {
	for _, r := range rules {
		if ok, _ := path.Match(r.tool, tool); !ok {
			continue
		}
		if r.glob.Match(rel) {
			return r, true
		}
	}
	return rule{}, false
}

// linesFor are the rules for tool as the policy's content lines: a deny
// line hides what it matches from tool exactly as --deny does, in every
// way tool shows content (sandbox.RuleLine).
func linesFor(rules []rule, tool string) []sandbox.RuleLine {
	var lines []sandbox.RuleLine
	for _, r := range rules {
		if ok, _ := path.Match(r.tool, tool); ok {
			lines = append(lines, sandbox.RuleLine{Deny: r.action == fsmcpv1.RuleAction_RULE_ACTION_DENY, Glob: r.glob, Label: r.label})
		}
	}
	return lines
}

// Lines are the rules in force for tool as the policy's content lines,
// reading the file again first if it changed. The command runner gives
// them to each command as it starts.
func (r *Rules) Lines(tool string) []sandbox.RuleLine { return linesFor(r.current(), tool) }

// anyDeny reports whether a deny line of the rules last read, for any
// tool, matches rel. It does not ask for a newer version: a listing meets
// many names (a pnpm store is hard links throughout), and each call
// starts by asking.
func (r *Rules) anyDeny(rel string) bool {
	r.mu.Lock()
	rules := r.rules
	r.mu.Unlock()
	for _, l := range rules {
		if l.action == fsmcpv1.RuleAction_RULE_ACTION_DENY && l.glob.Match(rel) {
			return true
		}
	}
	return false
}

// strictness orders decisions across a call's paths.
var strictness = map[fsmcpv1.RuleAction]int{
	fsmcpv1.RuleAction_RULE_ACTION_UNSPECIFIED: 0,
	fsmcpv1.RuleAction_RULE_ACTION_ALLOW:       1,
	fsmcpv1.RuleAction_RULE_ACTION_ASK:         2,
	fsmcpv1.RuleAction_RULE_ACTION_DENY:        3,
}

// Check implements fsmcpv1.WorkerServiceServer. Each path is resolved as
// the calls resolve names: its directory through the Root to the real
// path the kernel gives it, then the final name, and, when that is a
// symlink that stays inside, also where it leads. Every real path found is
// judged; the strictest decision wins.
func (s *Service) Check(ctx context.Context, req *fsmcpv1.CheckRequest) (*fsmcpv1.CheckResponse, error) {
	resp := &fsmcpv1.CheckResponse{}
	if s.rules == nil {
		return resp, nil
	}
	rules := s.rules.current()
	var judged []*fsmcpv1.JudgedPath
	for _, raw := range req.GetPaths() {
		name, err := clientPath(raw)
		if err != nil {
			return nil, err
		}
		rels, err := s.checkPaths(name)
		if err != nil {
			return nil, err
		}
		for _, rel := range rels {
			r, ok := first(rules, req.GetTool(), rel)
			jp := &fsmcpv1.JudgedPath{Path: []byte(rel), Name: []byte(name)}
			if ok {
				jp.Action = r.action
			}
			judged = append(judged, jp)
			if ok && strictness[r.action] > strictness[resp.Action] {
				resp = &fsmcpv1.CheckResponse{Action: r.action, Line: int32(r.line), Rule: r.text, Path: []byte(rel)}
			}
		}
	}
	resp.Judged = judged
	return resp, nil
}

// checkPaths returns the real root-relative paths raw names. A name whose
// directories do not all exist yet (fs_mkdir creates them) is judged as
// the real path of the deepest that does, with the rest as spelled,
// cleaned.
func (s *Service) checkPaths(p string) ([]string, error) {
	p = strings.TrimRight(p, "/")
	if p == "." || p == "" {
		return []string{""}, nil
	}
	dir, base := path.Split(p)
	rest := base
	for {
		if dir == "" {
			dir = "."
		}
		d, err := s.openDir("check", p, dir)
		if err == nil {
			defer d.close()
			rel := path.Clean(joinRel(d.rel, rest))
			if rel == "." || strings.HasPrefix(rel, "../") || rel == ".." {
				rel = ""
			}
			rels := []string{rel}
			if rest == base {
				if target, ok := s.linkRealPath(d, base, p); ok {
					rels = append(rels, target)
				}
			}
			return rels, nil
		}
		if !errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) || dir == "." {
			return nil, err
		}
		d2, b2 := path.Split(strings.TrimSuffix(dir, "/"))
		dir, rest = d2, b2+"/"+rest
	}
}

// linkRealPath is the real path where the symlink base of d leads, when it is
// one and leads to a file or directory inside the root. Only those are
// opened (non-blocking), as the tools that follow links open them.
func (s *Service) linkRealPath(d *parent, base, p string) (string, bool) {
	st, err := fstatat(d.fd, base)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", false
	}
	fi, err := s.root.Stat(p)
	if err != nil || !fi.Mode().IsRegular() && !fi.IsDir() {
		return "", false
	}
	f, err := s.root.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	target, err := s.realPath("check", p, int(f.Fd()))
	return target, err == nil
}
