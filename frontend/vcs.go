package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type vcsIn struct {
	Backend    string   `json:"backend" jsonschema:"the version-control system: one the operator enabled with --vcs (git, hg or svn)"`
	Path       *string  `json:"path,omitempty" jsonschema:"the working copy's directory (or one inside it); the root when left out"`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Files      []string `json:"files,omitempty" jsonschema:"restrict to these paths, relative to path (literal names, never options or patterns)"`
	TimeoutS   *int64   `json:"timeout_s,omitempty" jsonschema:"seconds before the command is killed; default 30"`
}

type vcsDiffIn struct {
	vcsIn
	Staged   *bool  `json:"staged,omitempty" jsonschema:"git: the index against HEAD instead of the work tree against the index"`
	MaxBytes *int64 `json:"max_bytes,omitempty" jsonschema:"the most bytes of the diff returned; default 65536, at most 1048576"`
}

func vcsTools(cfg *Config) []*tool {
	if len(cfg.Exec.VCS) == 0 {
		return nil
	}
	return []*tool{vcsStatusTool.tool(), vcsDiffTool.tool()}
}

// vcsArgs checks what both tools share.
func (s *server) vcsArgs(in *vcsIn) (path []byte, files [][]byte, timeoutMS int64, err error) {
	if path, err = rootedPath("path", in.Path, in.PathBase64); err != nil {
		return nil, nil, 0, err
	}
	for _, f := range in.Files {
		files = append(files, []byte(f))
	}
	timeout, err := s.timeoutArg(in.TimeoutS)
	return path, files, timeout.Milliseconds(), err
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

func (s *server) vcsDiff(ctx context.Context, in *vcsDiffIn, _ *mcp.CallToolRequest) (*obj, error) {
	path, files, timeoutMS, err := s.vcsArgs(&in.vcsIn)
	if err != nil {
		return nil, err
	}
	maxBytes, err := maxBytesArg(in.MaxBytes)
	if err != nil {
		return nil, err
	}
	resp, err := s.ec.VcsDiff(ctx, &fsmcpv1.VcsDiffRequest{Backend: in.Backend, Path: path, Files: files,
		Staged: boolArg(in.Staged), TimeoutMs: timeoutMS, MaxBytes: maxBytes})
	if err != nil {
		return nil, err
	}
	r := resp.GetResult()
	doc := newObj().bool("ok", true).str("backend", in.Backend).name("path", displayPath(path))
	// The diff is the command's stdout, under its own name.
	renamed := &fsmcpv1.CommandResult{Exited: r.GetExited(), Exit: r.GetExit(), Signal: r.GetSignal(), TimedOut: r.GetTimedOut(),
		DurationMs: r.GetDurationMs(), Stderr: r.GetStderr(), StderrTruncated: r.GetStderrTruncated()}
	avail := int(s.cfg.MaxResponseBytes) - doc.size() - commandFields
	writeStream(doc, "diff", r.GetStdout(), r.GetStdoutTruncated(), avail*3/4)
	commandResult(doc, renamed, false, int(s.cfg.MaxResponseBytes)-doc.size()-commandFields)
	return doc, nil
}
