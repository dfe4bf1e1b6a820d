package command

import (
	"bytes"
	"context"
	"encoding/xml"
	"path/filepath"

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
