package frontend

import (
	"context"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fs_tree: a subtree as a flat list, directories included, sorted by path
// bytes and paged with a cursor. The worker decides with rg what is listed
// (worker/tree.go); this is the schema and the reply.

type treeIn struct {
	Path       *string  `json:"path,omitempty" jsonschema:"directory; root if left out, \"\" or \".\""`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	MaxDepth   *int64   `json:"max_depth,omitempty" jsonschema:"levels below path, 1 to 16; default 3"`
	Hidden     *bool    `json:"hidden,omitempty" jsonschema:"include hidden files"`
	NoIgnore   *bool    `json:"no_ignore,omitempty" jsonschema:"include .gitignored files"`
	Exclude    []string `json:"exclude,omitempty" jsonschema:"globs of paths to leave out, e.g. [\"node_modules\", \"*.log\"]"`
	Cursor     *string  `json:"cursor,omitempty" jsonschema:"cursor from a truncated reply"`
}

// defaultTreeDepth and maxTreeDepth are fs_tree's max_depth default and
// bound.
const (
	defaultTreeDepth = 3
	maxTreeDepth     = 16
)

var treeTool = toolDecl[treeIn]{
	name:  "fs_tree",
	title: "Show tree",
	description: "List the files and directories below path, empty ones too, to max_depth levels. " +
		"The list is flat, sorted by path, with each file's size; a directory with more below the limit says " +
		"more: call again on it. Hidden and .gitignored files are left out as fs_glob leaves them out; " +
		"symlinks are listed, never followed. When truncated is true, call again with the reply's cursor.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).tree,
}

func (s *server) tree(ctx context.Context, in *treeIn, req *mcp.CallToolRequest) (*obj, error) {
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	after, hasAfter, err := parseCursor(in.Cursor)
	if err != nil {
		return nil, err
	}
	depth := int64(defaultTreeDepth)
	if in.MaxDepth != nil {
		if depth = *in.MaxDepth; depth < 1 || depth > maxTreeDepth {
			return nil, invalidf("max_depth must be between 1 and %d", maxTreeDepth)
		}
	}
	if err := excludeArg(in.Exclude); err != nil {
		return nil, err
	}
	stream, err := s.wc.Tree(ctx, &fsmcpv1.TreeRequest{Path: p, MaxDepth: int32(depth), Hidden: boolArg(in.Hidden),
		NoIgnore: boolArg(in.NoIgnore), Excludes: in.Exclude, After: after, HasAfter: hasAfter, MaxBytes: s.cfg.MaxResponseBytes})
	if err != nil {
		return nil, err
	}
	notify := progressFunc(ctx, req)
	resp, err := finalMessage(stream, func(pr *fsmcpv1.Progress) {
		notify(float64(pr.GetFilesSearched()), fmt.Sprintf("%d files listed", pr.GetFilesSearched()))
	})
	if err != nil {
		return nil, err
	}
	max := int(s.cfg.MaxResponseBytes)
	doc := pageObj(max)
	doc.bool("ok", true).name("path", displayPath(p))
	doc.key("entries")
	doc.b = append(doc.b, '[')
	tail := len(`,"total":,"unreadable":`) + 2*20 + pageTail
	var last []byte
	truncated := resp.GetMore()
	item := &obj{b: make([]byte, 0, 256)}
	for i, e := range resp.GetEntries() {
		item.reset()
		item.name("path", e.GetPath()).str("type", typeName(e.GetType()))
		if e.GetType() == fsmcpv1.FileType_FILE_TYPE_FILE {
			item.int("size", e.GetSize())
		}
		if e.GetMore() {
			item.bool("more", true)
		}
		item.b = append(item.b, '}')
		if 1+len(item.b) > pageRoom(doc, max, tail, cursorLen(len(e.GetPath()))) {
			truncated = true
			break
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, item.b...)
		last = e.GetPath()
	}
	doc.b = append(doc.b, ']')
	doc.int("total", resp.GetTotal())
	if n := resp.GetErrors(); n > 0 {
		doc.int("unreadable", n)
	}
	if truncated {
		if last == nil {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one entry does not fit in --max-response-bytes")
		}
		doc.bool("truncated", true).str("cursor", cursorFor(last))
	}
	return doc, nil
}
