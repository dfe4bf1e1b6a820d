package frontend

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type globIn struct {
	Pattern    string   `json:"pattern" jsonschema:"glob, e.g. **/*.go"`
	Path       *string  `json:"path,omitempty" jsonschema:"root if left out, \"\" or \".\""`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Hidden     *bool    `json:"hidden,omitempty" jsonschema:"include hidden files"`
	NoIgnore   *bool    `json:"no_ignore,omitempty" jsonschema:"include .gitignored files"`
	MaxDepth   *int64   `json:"max_depth,omitempty" jsonschema:"directories to descend below path; 1 is path's own entries"`
	Exclude    []string `json:"exclude,omitempty" jsonschema:"globs of paths to leave out, e.g. [\"node_modules\", \"*.log\"]"`
	Sort       *string  `json:"sort,omitempty" jsonschema:"path (default) or mtime: newest first, each with its mtime"`
	Cursor     *string  `json:"cursor,omitempty" jsonschema:"cursor from a truncated reply"`
}

var globTool = toolDecl[globIn]{
	name:  "fs_glob",
	title: "Find files",
	description: "Find files below path whose path matches a glob, sorted by path. Hidden and .gitignored " +
		"files are left out unless hidden or no_ignore. When truncated is true, call again with the reply's cursor. " +
		"To search inside files use fs_grep.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).glob,
}

func (s *server) glob(ctx context.Context, in *globIn, req *mcp.CallToolRequest) (*obj, error) {
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	greq := &fsmcpv1.GlobRequest{Pattern: in.Pattern, Path: p, Hidden: boolArg(in.Hidden),
		NoIgnore: boolArg(in.NoIgnore), MaxBytes: s.cfg.MaxResponseBytes}
	if in.MaxDepth != nil {
		if *in.MaxDepth < 1 || *in.MaxDepth > maxGlobDepth {
			return nil, invalidf("max_depth must be between 1 and %d", maxGlobDepth)
		}
		greq.MaxDepth = int32(*in.MaxDepth)
	}
	if err := excludeArg(in.Exclude); err != nil {
		return nil, err
	}
	greq.Excludes = in.Exclude
	byMtime := false
	if in.Sort != nil {
		switch *in.Sort {
		case "path":
		case "mtime":
			byMtime = true
			greq.Sort = fsmcpv1.ListingSort_LISTING_SORT_MTIME
		default:
			return nil, invalidf("sort must be path or mtime")
		}
	}
	if byMtime {
		greq.After, greq.AfterMtimeUnixNano, greq.HasAfter, err = parseKeyCursor(in.Cursor)
	} else {
		greq.After, greq.HasAfter, err = parseCursor(in.Cursor)
	}
	if err != nil {
		return nil, err
	}
	stream, err := s.wc.Glob(ctx, greq)
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

	// By path, the page is the worker's text of its entries, checked:
	// sizes holds each entry's length in the document.
	text, ends := resp.GetEntriesJson(), resp.GetEntryEnds()
	paths, mtimes := resp.GetPaths(), resp.GetMtimesUnixNano()
	var sizes []uint32
	var ok bool
	n := len(ends)
	if byMtime {
		n = len(paths)
		if len(mtimes) != n {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "the worker sent %d mtimes for %d paths", len(mtimes), n)
		}
	} else if sizes, ok = jsontext.TextObjects(text, ends, "path", make([]uint32, 0, n)); !ok {
		return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "the worker sent a page that is not path objects")
	}

	max := int(s.cfg.MaxResponseBytes)
	// By path, the entries stay in the worker's block: the document
	// itself is a few bytes.
	doc := newObj()
	if byMtime {
		doc = pageObj(max)
	}
	doc.bool("ok", true).name("path", displayPath(p))
	doc.key("files")
	doc.b = append(doc.b, '[')
	doc.runAt = len(doc.b)
	tail := len(`,"total":,"unreadable":`) + 2*20 + pageTail
	// last is the index of the last entry placed, -1 for none.
	last := -1
	truncated := resp.GetMore()
	item := &obj{b: make([]byte, 0, 256)}
	for i := range n {
		var size int
		if byMtime {
			item.reset()
			item.name("path", paths[i])
			item.str("mtime", formatTime(mtimes[i]))
			item.b = append(item.b, '}')
			size = len(item.b)
		} else {
			size = int(sizes[i])
		}
		// The cursor holds the path, which is never longer than its
		// object.
		if 1+size > pageRoom(doc, max, tail, cursorLen(size+binary.MaxVarintLen64)) {
			truncated = true
			break
		}
		comma := 0
		if i > 0 {
			comma = 1
		}
		if byMtime {
			if comma > 0 {
				doc.b = append(doc.b, ',')
			}
			doc.b = append(doc.b, item.b...)
		} else {
			doc.runSize += comma + size
		}
		last = i
	}
	if !byMtime && last >= 0 {
		doc.run = text[:ends[last]]
	}
	doc.b = append(doc.b, ']')
	doc.int("total", resp.GetTotal())
	if n := resp.GetErrors(); n > 0 {
		doc.int("unreadable", n)
	}
	if truncated {
		if last < 0 {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one path does not fit in --max-response-bytes")
		}
		var c string
		if byMtime {
			c = keyCursor(mtimes[last], paths[last])
		} else {
			from := 0
			if last > 0 {
				from = int(ends[last-1]) + 1
			}
			path, err := pathOfObject(text[from:ends[last]])
			if err != nil {
				return nil, err
			}
			c = cursorFor(path)
		}
		doc.bool("truncated", true).str("cursor", c)
	}
	return doc, nil
}

// pathOfObject is the path an object {"path":…} or {"path_base64":…} of
// a page names, given as it stands in the reply's text.
func pathOfObject(o []byte) ([]byte, error) {
	var v struct {
		Path       *string `json:"path"`
		PathBase64 []byte  `json:"path_base64"`
	}
	doc := (&splicedText{run: o}).document()
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "the worker sent a page entry that is not JSON: %v", err)
	}
	if v.Path != nil {
		return []byte(*v.Path), nil
	}
	return v.PathBase64, nil
}

// maxGlobDepth bounds fs_glob's max_depth: no tree an agent lists is
// deeper, and rg needs a number.
const maxGlobDepth = 1 << 16
