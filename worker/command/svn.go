package command

import (
	"bytes"
	"context"
	"encoding/xml"
	"path"
	"path/filepath"
	"slices"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// Subversion keeps no program-running configuration in a working copy
// (its hooks live in the server's repository and run on commit), but its
// runtime configuration can name programs (diff-cmd, diff3-cmd, editor-cmd,
// merge-tool-cmd, ssh tunnels) and an svn:externals property names other
// repositories, possibly file:// URLs outside the root. So every svn
// command runs with:
//   - --config-dir in the call's scratch directory: a fresh, empty user
//     configuration, never the operator's ~/.subversion (the system
//     /etc/subversion is outside every grant);
//   - --non-interactive: no prompt, no editor;
//   - diff --internal-diff: never a diff-cmd;
//   - status --ignore-externals: an external is neither reported nor
//     looked at (diff does not descend into externals at all);
//   - for status, every file with a trailing "@", so a name containing
//     "@" is never read as a peg revision (status refuses pegs; diff
//     takes a local name literally and would look for the "@").
//
// And the kernel refuses any program svn would start: only svn's own
// files are executable.

// svnEnv is svn's environment besides baseEnv.
var svnEnv = []string{"SVN_EDITOR=false", "EDITOR=false", "VISUAL=false", "SVN_SSH=false"}

// svn runs one svn subcommand with the hardening, read-only; with peg,
// each file is closed by an empty peg revision.
func (s *Service) svn(ctx context.Context, c *vcsCall, capture int64, peg bool, args ...string) (*fsmcpv1.CommandResult, error) {
	timeout, _, err := s.bounds(c.timeout, max(c.maxBytes, 1))
	if err != nil {
		return nil, err
	}
	argv := append([]string{"svn"}, args...)
	argv = append(argv, "--non-interactive", "--")
	for _, f := range c.files {
		if peg {
			f += "@"
		}
		argv = append(argv, f)
	}
	return s.run(ctx, runSpec{prog: c.prog, argv: argv, env: svnEnv, cwd: c.path, lines: c.lines,
		files: c.prog.files, readDirs: c.prog.readDirs, timeout: timeout, capture: capture,
		scratchArgs: func(scratch string) []string {
			return []string{"--config-dir", filepath.Join(scratch, "svn")}
		}})
}

// svnDiff runs svn diff; under a policy that denies content, of the
// paths svn diff --summarize lists, less each whose path the policy
// denies. A directory is named only when nothing beneath it is left out
// (its diff covers its whole tree: even at --depth empty, that of a
// deleted directory shows its files), and then covers the paths beneath
// it; otherwise its files are named one by one, and its own property
// changes are not shown. Copies are shown as additions of their own content, never as a diff
// against their source's stored one. svn diff takes a local name
// literally: no "@" is appended.
func (s *Service) svnDiff(ctx context.Context, c *vcsCall) (*fsmcpv1.CommandResult, error) {
	diff := func(c *vcsCall) (*fsmcpv1.CommandResult, error) {
		return s.svn(ctx, c, c.maxBytes, false, "diff", "--internal-diff", "--show-copies-as-adds")
	}
	pol := s.policy.WithLines(c.lines)
	if !pol.Denies() {
		return s.svn(ctx, c, c.maxBytes, false, "diff", "--internal-diff")
	}
	dir, err := s.realDir(c.path)
	if err != nil {
		return nil, err
	}
	res, err := s.svn(ctx, c, captureBytes, false, "diff", "--summarize", "--xml")
	switch {
	case err != nil:
		return nil, err
	case !res.GetExited() || res.GetExit() != 0:
		return res, nil // not a working copy, or a bad file: svn says which
	case res.GetStdoutTruncated():
		return nil, statusCut("svn")
	}
	var doc struct {
		Paths []struct {
			Name string `xml:",chardata"`
			Kind string `xml:"kind,attr"`
		} `xml:"paths>path"`
	}
	if err := xml.NewDecoder(bytes.NewReader(res.GetStdout())).Decode(&doc); err != nil {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "svn diff --summarize --xml: %v", err)
	}
	var left []string
	for _, p := range doc.Paths {
		if _, deny := pol.Denied(path.Join(dir, p.Name)); deny {
			left = append(left, p.Name)
		}
	}
	// beneath reports whether name lies in directory d ("." the call's).
	beneath := func(name, d string) bool { return name != d && (d == "." || strings.HasPrefix(name, d+"/")) }
	holds := func(d string) bool { return slices.ContainsFunc(left, func(l string) bool { return beneath(l, d) }) }
	var dirs []string // named directories: none holds a path left out
	for _, p := range doc.Paths {
		if p.Kind == "dir" && !slices.Contains(left, p.Name) && !holds(p.Name) {
			dirs = append(dirs, p.Name)
		}
	}
	var list []changed
	for _, p := range doc.Paths {
		switch {
		case slices.Contains(left, p.Name):
			list = append(list, changed{name: p.Name, left: true})
		case p.Kind == "dir" && holds(p.Name):
			// Not named: its files are, one by one; its own
			// property changes are not shown.
		case !slices.ContainsFunc(dirs, func(d string) bool { return beneath(p.Name, d) }):
			list = append(list, changed{name: p.Name}) // else in its directory's diff
		}
	}
	return diffNamed(c, list, diff)
}

// svnStatus runs svn status --xml and parses it.
func (s *Service) svnStatus(ctx context.Context, c *vcsCall) (*fsmcpv1.VcsStatusResponse, error) {
	res, err := s.svn(ctx, c, captureBytes, true, "status", "--xml", "--ignore-externals")
	if err != nil {
		return nil, err
	}
	resp := &fsmcpv1.VcsStatusResponse{Result: res}
	parseSvnStatus(resp, res.GetStdout(), res.GetStdoutTruncated())
	res.Stdout = nil
	return resp, nil
}

// svnStatusXML is what svn status --xml reports that is kept.
type svnStatusXML struct {
	Targets []struct {
		Entries []struct {
			Path   string `xml:"path,attr"`
			Status struct {
				Item          string `xml:"item,attr"`
				Props         string `xml:"props,attr"`
				MovedFrom     string `xml:"moved-from,attr"`
				MovedTo       string `xml:"moved-to,attr"`
				TreeConflicts string `xml:"tree-conflicted,attr"`
			} `xml:"wc-status"`
		} `xml:"entry"`
	} `xml:"target"`
}

// svnLetters are svn status's letters for an item or its properties.
var svnLetters = map[string]string{
	"added": "A", "conflicted": "C", "deleted": "D", "ignored": "I", "incomplete": "!",
	"missing": "!", "modified": "M", "obstructed": "~", "replaced": "R", "unversioned": "?",
	"external": "X", "normal": ".", "none": ".",
}

// parseSvnStatus reads svn status --xml into resp. xy is svn's first two
// columns, the item's and its properties' letters ("." unchanged, as in
// git's): "M." a modified file, ".M" changed properties. Kinds:
// "untracked" (?), "ignored" (I), "unmerged" (a text, property or tree
// conflict), "renamed" (added as moved-from a deleted path, whose own
// deletion is then part of the one entry, as in git), else "changed".
// Paths are as svn names them: relative to the call's path. A cut
// output keeps no entry: XML cut short is not parsed in part.
func parseSvnStatus(resp *fsmcpv1.VcsStatusResponse, out []byte, cut bool) {
	var doc svnStatusXML
	if cut || xml.NewDecoder(bytes.NewReader(out)).Decode(&doc) != nil {
		resp.EntriesTruncated = cut
		return
	}
	for _, t := range doc.Targets {
		for _, e := range t.Entries {
			st := e.Status
			if st.Item == "external" || (st.Item == "deleted" && st.MovedTo != "") {
				continue
			}
			item, props := svnLetters[st.Item], svnLetters[st.Props]
			if item == "" {
				item = "*" // a state this svn version does not document
			}
			if props == "" {
				props = "*"
			}
			v := &fsmcpv1.VcsEntry{Kind: "changed", Xy: item + props, Path: []byte(e.Path)}
			switch {
			case st.Item == "unversioned":
				v.Kind = "untracked"
			case st.Item == "ignored":
				v.Kind = "ignored"
			case st.Item == "conflicted" || st.Props == "conflicted" || st.TreeConflicts == "true":
				v.Kind = "unmerged"
			case st.MovedFrom != "":
				v.Kind, v.OrigPath = "renamed", []byte(st.MovedFrom)
			}
			resp.Entries = append(resp.Entries, v)
		}
	}
}
