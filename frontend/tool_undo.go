package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type undoIn struct {
	Undo string `json:"undo" jsonschema:"the undo token of an earlier reply (fs_write, fs_replace, fs_splice, fs_patch, fs_delete or fs_undo)"`
}

var undoTool = toolDecl[undoIn]{
	name:  "fs_undo",
	title: "Undo a change",
	description: "Restore what an earlier call replaced or removed, from its reply's undo token: " +
		"a deleted entry comes back to its path if that is free; a replaced file only if it is still exactly the file " +
		"that call wrote; a patch's files all or none. Otherwise precondition_failed and nothing changes. " +
		"The reply's own undo token reverses the undo.",
	hints:   hints{destructive: true},
	enabled: func(c *Config) bool { return c.Quarantine != "" },
	run:     (*server).undo,
}

func (s *server) undo(ctx context.Context, in *undoIn, _ *mcp.CallToolRequest) (*obj, error) {
	if in.Undo == "" {
		return nil, invalidf("undo must not be empty")
	}
	noteUndone(ctx, in.Undo)
	resp, err := s.wc.Undo(ctx, &fsmcpv1.UndoRequest{Token: in.Undo})
	if err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).name("path", resp.GetPath()).str("type", typeName(resp.GetType()))
	if paths := resp.GetPaths(); len(paths) > 1 {
		// A patch: every file it touched, each as a path or path_base64.
		doc.key("paths")
		doc.b = append(doc.b, '[')
		for i, p := range paths {
			if i > 0 {
				doc.b = append(doc.b, ',')
			}
			doc.b = append(doc.b, newObj().name("path", p).bytes()...)
		}
		doc.b = append(doc.b, ']')
	}
	return withUndo(ctx, doc, resp.GetUndo()), nil
}
