package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type vcsDiffIn struct {
	vcsIn
	Staged   *bool  `json:"staged,omitempty" jsonschema:"git: the index against HEAD instead of the work tree against the index"`
	MaxBytes *int64 `json:"max_bytes,omitempty" jsonschema:"the most bytes of the diff returned; default 65536, at most 1048576"`
}

var vcsDiffTool = toolDecl[vcsDiffIn]{
	name:  "fs_vcs_diff",
	title: "Version-control diff",
	description: "The working copy's unstaged diff (or, with staged, the index's), as text or base64, " +
		"bounded by max_bytes. Runs read-only in the command confinement; external diffs and textconv filters never run.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path"), pathsUnder("files")},
	run:   (*server).vcsDiff,
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
