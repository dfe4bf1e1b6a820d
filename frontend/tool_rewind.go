package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type rewindIn struct {
	ID         string   `json:"id" jsonschema:"the checkpoint to go back to (fs_checkpoint's id, or one fs_checkpoints lists)"`
	Path       *string  `json:"path,omitempty" jsonschema:"rewind only this subtree; the whole root if left out"`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	DryRun     *bool    `json:"dry_run,omitempty" jsonschema:"list the changes and conflicts, change nothing"`
	Keep       []string `json:"keep,omitempty" jsonschema:"paths to leave as they are, changed or not"`
	Force      *bool    `json:"force,omitempty" jsonschema:"rewind conflicting paths too; their current versions are kept for fs_undo"`
}

var rewindTool = toolDecl[rewindIn]{
	name:  "fs_rewind",
	title: "Rewind to a checkpoint",
	description: "Bring the root, or the subtree path, back to a checkpoint: changed files get their old " +
		"bytes and metadata, files created since are removed, removed ones return, all or nothing. A path changed since " +
		"the checkpoint by anything other than these tools (an editor, a command) is a conflict: the rewind is refused " +
		"listing conflicts, unless keep names it or force is true. dry_run lists what would change and the conflicts. The reply's undo " +
		"token reverses the rewind, and checkpoint is one taken just before it.",
	hints:   hints{destructive: true},
	paths:   []pathDecl{onePath("path").acted(), listOfPaths("keep")},
	enabled: func(c *Config) bool { return c.Quarantine != "" },
	run:     (*server).rewind,
}

func (s *server) rewind(ctx context.Context, in *rewindIn, _ *mcp.CallToolRequest) (*obj, error) {
	if in.ID == "" {
		return nil, invalidf("id must not be empty: fs_checkpoints lists the checkpoints")
	}
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	req := &fsmcpv1.RewindRequest{Id: in.ID, Path: p, DryRun: in.DryRun != nil && *in.DryRun, Force: in.Force != nil && *in.Force}
	for _, k := range in.Keep {
		req.Keep = append(req.Keep, []byte(k))
	}
	resp, err := s.wc.Rewind(ctx, req)
	if err != nil {
		return nil, err
	}
	if n := len(resp.GetConflicts()); n > 0 && !req.DryRun {
		e := errf(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED,
			"rewind: %d %s changed since the checkpoint outside these tools or cannot be restored; nothing was changed "+
				"(keep leaves a path as it is; force rewinds the changed ones, never a lost one)", n, plural(n, "path", "paths"))
		e.conflicts = conflictList(resp.GetConflicts())
		return nil, e
	}
	doc := newObj().bool("ok", true)
	if req.DryRun {
		doc.bool("dry_run", true)
	}
	doc.key("changes")
	doc.b = append(doc.b, '[')
	for i, ch := range resp.GetChanges() {
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		e := newObj().name("path", ch.GetPath()).str("action", ch.GetAction())
		if ch.GetOldSize() >= 0 {
			e.int("old_size", ch.GetOldSize())
		}
		if ch.GetNewSize() >= 0 {
			e.int("new_size", ch.GetNewSize())
		}
		if ch.GetDiff() != "" {
			e.str("diff", ch.GetDiff())
		}
		doc.b = append(doc.b, e.bytes()...)
	}
	doc.b = append(doc.b, ']')
	if cs := resp.GetConflicts(); len(cs) > 0 {
		// A dry run lists them beside the changes; a rewind would be
		// refused.
		doc.rawValue("conflicts", conflictList(cs))
	}
	if kept := resp.GetKept(); len(kept) > 0 {
		doc.key("kept")
		doc.b = append(doc.b, '[')
		for i, k := range kept {
			if i > 0 {
				doc.b = append(doc.b, ',')
			}
			doc.b = append(doc.b, newObj().name("path", k).bytes()...)
		}
		doc.b = append(doc.b, ']')
	}
	if cp := resp.GetCheckpoint(); cp != "" {
		doc.str("checkpoint", cp)
	}
	if ev := resp.GetEvictedCheckpoint(); ev != "" {
		doc.str("evicted_checkpoint", ev)
	}
	return withUndo(ctx, doc, resp.GetUndo()), nil
}

// conflictList renders a refused rewind's conflicts as a JSON array.
func conflictList(cs []*fsmcpv1.RewindConflict) []byte {
	b := []byte{'['}
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		e := newObj().name("path", c.GetPath()).str("reason", c.GetReason())
		if c.GetLost() {
			e.bool("lost", true)
		}
		b = append(b, e.bytes()...)
	}
	return append(b, ']')
}
