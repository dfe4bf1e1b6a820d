package worker

import (
	"context"
	"errors"
	"os"
	"path"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"golang.org/x/sys/unix"
)

// Check judges a call's paths by the operator's --rules (rulesfile) before
// the call: the front-end asks it, and acts on the answer
// (frontend/permit.go). The call then carries what Check judged, and the
// resolver judges the rules again as the call resolves (callrules.go).

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
	rules := s.rules.Current()
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
			r, ok := rulesfile.First(rules, req.GetTool(), rel)
			jp := &fsmcpv1.JudgedPath{Path: []byte(rel), Name: []byte(name)}
			if ok {
				jp.Action = r.Action
			}
			judged = append(judged, jp)
			if ok && strictness[r.Action] > strictness[resp.Action] {
				resp = &fsmcpv1.CheckResponse{Action: r.Action, Line: int32(r.Line), Rule: r.Text, Path: []byte(rel)}
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
	st, err := fileio.Lstatat(d.fd, base)
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
