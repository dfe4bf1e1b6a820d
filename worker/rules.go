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
// The worker reads the file, as it alone may open files, and reads it
// again when its identity or times change (an atomic replace makes a new
// inode, an edit in place moves mtime and ctime): each Check stats it. A
// file that fails to parse at start stops the worker; a bad edit later
// keeps the rules in force and is logged once.
//
// Check judges before the call; the call carries what Check judged, and
// the resolver judges the rules again on each name the call resolves
// (callrules.go), so a rename between the two cannot take the call
// somewhere the rules did not judge.
type Rules struct {
	dir  *os.File // the file's directory, O_PATH
	name string

	mu    sync.Mutex
	rules []rule
	stamp fileStamp
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
}

// fileStamp tells one version of the rules file from another.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

// maxRulesBytes bounds the rules file.
const maxRulesBytes = 1 << 20

// OpenRules reads the rules file at file (an absolute path) and keeps its
// directory open to read it again. It fails on a file that does not parse.
func OpenRules(file string) (*Rules, error) {
	dir, name := path.Split(file)
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("--rules: %w", err)
	}
	r := &Rules{dir: d, name: name}
	rules, stamp, err := r.load()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("--rules %s: %w", file, err)
	}
	r.rules, r.stamp = rules, stamp
	return r, nil
}

// Dir is the rules file's directory, for the Landlock rule that lets the
// confined worker read the file again.
func (r *Rules) Dir() string { return fmt.Sprintf("/proc/self/fd/%d", r.dir.Fd()) }

func (r *Rules) statFile() (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(r.dir.Fd()), r.name, &st, 0); err != nil {
		return fileStamp{}, err
	}
	return fileStamp{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}, nil
}

// load reads and parses the file, with the stamp of what it read.
func (r *Rules) load() ([]rule, fileStamp, error) {
	fd, err := unix.Openat(int(r.dir.Fd()), r.name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fileStamp{}, err
	}
	f := os.NewFile(uintptr(fd), r.name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fileStamp{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fileStamp{}, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRulesBytes+1))
	if err != nil {
		return nil, fileStamp{}, err
	}
	if len(data) > maxRulesBytes {
		return nil, fileStamp{}, fmt.Errorf("larger than %d bytes", maxRulesBytes)
	}
	rules, err := parseRules(data)
	return rules, fileStamp{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}, err
}

// current returns the rules in force, reading the file again first if it
// changed. A file that is gone or does not parse leaves the rules as they
// were, and says why on stderr once per version.
func (r *Rules) current() []rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp, err := r.statFile()
	if err == nil && (stamp == r.stamp || r.reported && stamp == r.bad) {
		return r.rules
	}
	var rules []rule
	if err == nil {
		rules, stamp, err = r.load()
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
	r.rules, r.stamp, r.bad, r.reported = rules, stamp, fileStamp{}, false
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
