package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var vcsStatusTool = toolDecl[vcsIn]{
	name:  "fs_vcs_status",
	title: "Version-control status",
	description: "The working copy's status (git status --porcelain=v2, hg status, svn status --xml; parsed): git's branch and one entry " +
		"per changed, renamed, unmerged, untracked path. Runs read-only in the command confinement; the repository's own " +
		"configuration (hooks, fsmonitor, filters, pagers) runs nothing.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path"), pathsUnder("files")},
	run:   (*server).vcsStatus,
}

func (s *server) vcsStatus(ctx context.Context, in *vcsIn, _ *mcp.CallToolRequest) (*obj, error) {
	path, files, timeoutMS, err := s.vcsArgs(in)
	if err != nil {
		return nil, err
	}
	resp, err := s.ec.VcsStatus(ctx, &fsmcpv1.VcsStatusRequest{Backend: in.Backend, Path: path, Files: files, TimeoutMs: timeoutMS})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).str("backend", in.Backend).name("path", displayPath(path))
	branch := newObj()
	for _, kv := range [][2]string{{"oid", resp.GetBranchOid()}, {"head", resp.GetBranchHead()}, {"upstream", resp.GetBranchUpstream()}} {
		if kv[1] != "" {
			branch.str(kv[0], kv[1])
		}
	}
	if resp.GetHasAheadBehind() {
		branch.int("ahead", resp.GetAhead()).int("behind", resp.GetBehind())
	}
	doc.object("branch", branch)
	// The entries take at most three quarters of the reply; how git
	// ended and its stderr what is left.
	max := int(s.cfg.MaxResponseBytes) * 3 / 4
	doc.key("entries")
	doc.b = append(doc.b, '[')
	truncated := resp.GetEntriesTruncated()
	for i, e := range resp.GetEntries() {
		item := newObj().str("kind", e.GetKind())
		if e.GetXy() != "" {
			item.str("xy", e.GetXy())
		}
		item.name("path", e.GetPath())
		if e.GetKind() == "renamed" || e.GetKind() == "copied" {
			item.name("orig_path", e.GetOrigPath()).str("score", e.GetScore())
		}
		if e.GetSubmodule() != "" {
			item.str("submodule", e.GetSubmodule())
		}
		b := item.bytes()
		if len(doc.b)+1+len(b) > max {
			truncated = true
			break
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, b...)
	}
	doc.b = append(doc.b, ']')
	doc.bool("entries_truncated", truncated)
	commandResult(doc, resp.GetResult(), false, int(s.cfg.MaxResponseBytes)-doc.size()-commandFields)
	return doc, nil
}
