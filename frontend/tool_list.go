package frontend

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strconv"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type listIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"root if left out, \"\" or \".\""`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Sort       *string `json:"sort,omitempty" jsonschema:"name (default), size (largest first) or mtime (newest first)"`
	Totals     *bool   `json:"totals,omitempty" jsonschema:"add totals of the whole directory: files, directories, bytes"`
	Cursor     *string `json:"cursor,omitempty" jsonschema:"cursor from a truncated reply"`
}

var listTool = toolDecl[listIn]{
	name:  "fs_list",
	title: "List directory",
	description: "List one directory's entries (name, type, size, mtime, mode), sorted by name. " +
		"When truncated is true, call again with the reply's cursor. To find files in a whole tree use fs_glob.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).list,
}

func (s *server) list(ctx context.Context, in *listIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	order := listSorts["name"]
	if in.Sort != nil {
		var ok bool
		if order, ok = listSorts[*in.Sort]; !ok {
			return nil, invalidf("sort must be name, size or mtime")
		}
	}
	lreq := &fsmcpv1.ListRequest{Path: p, MaxBytes: s.cfg.MaxResponseBytes, Sort: order.order, Totals: boolArg(in.Totals)}
	if err := parseListCursor(in.Cursor, order.letter, lreq); err != nil {
		return nil, err
	}
	resp, err := s.wc.List(ctx, lreq)
	if err != nil {
		return nil, err
	}
	var totals []byte
	if t := resp.GetTotals(); t != nil {
		totals = newObj().int("files", t.GetFiles()).int("directories", t.GetDirectories()).int("bytes", t.GetBytes()).bytes()
	}
	c := resp.GetColumns()
	names, ends := c.GetNames(), c.GetNameEnds()
	n := len(ends)
	if len(c.GetTypes()) != n || len(c.GetSizes()) != n || len(c.GetMtimesUnixNano()) != n || len(c.GetModes()) != n ||
		!slices.IsSorted(ends) || n > 0 && int(ends[n-1]) > len(names) {
		return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "list: the worker's page is inconsistent")
	}
	max := int(s.cfg.MaxResponseBytes)
	// Room for what the page will most likely hold, not for the bound:
	// a short listing does not clear a whole reply's memory.
	doc := pageObj(min(max, 256+len(totals)+len(names)+n*listEntryRoom))
	doc.bool("ok", true).name("path", displayPath(p))
	doc.key("entries")
	doc.b = append(doc.b, '[')
	tail := pageTail
	if totals != nil {
		tail += len(`,"totals":`) + len(totals)
	}
	last := -1
	truncated := resp.GetMore()
	start := uint32(0)
	for i := range n {
		name := names[start:ends[i]]
		start = ends[i]
		mark := len(doc.b)
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = appendEntry(doc.b, name, c.Types[i], c.Sizes[i], c.MtimesUnixNano[i], c.Modes[i])
		if pageRoom(doc, max, tail, cursorLen(len(name)+binary.MaxVarintLen64+2)) < 0 {
			doc.b = doc.b[:mark]
			truncated = true
			break
		}
		last = i
	}
	doc.b = append(doc.b, ']')
	if totals != nil {
		doc.rawValue("totals", totals)
	}
	if truncated {
		if last < 0 {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one entry does not fit in --max-response-bytes")
		}
		key := c.Sizes[last]
		if order.letter == listCursorMtime {
			key = c.MtimesUnixNano[last]
		}
		from := uint32(0)
		if last > 0 {
			from = ends[last-1]
		}
		doc.bool("truncated", true).str("cursor", listCursor(order.letter, key, names[from:ends[last]]))
	}
	return doc, nil
}

func listSortName(letter byte) string {
	for name, s := range listSorts {
		if s.letter == letter {
			return name
		}
	}
	return "name"
}

// listEntryRoom is what an entry takes besides its name, but for a name
// that needs escapes or base64: {"name":"","type":"directory","size":N,
// "mtime":"…","mode":"0755"}, with a 12-digit size.
const listEntryRoom = 112

// appendEntry appends one listed entry's object to b, as entryFields and
// name would write it, without building it apart first: a listing writes
// thousands.
func appendEntry(b, name []byte, typ fsmcpv1.FileType, size, mtime int64, mode uint32) []byte {
	if utf8.Valid(name) {
		b = append(b, `{"name":`...)
		b = jsontext.AppendString(b, name)
	} else {
		b = append(b, `{"name_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, name)
		b = append(b, '"')
	}
	b = append(b, `,"type":"`...)
	b = append(b, typeNames[typ]...)
	b = append(b, `","size":`...)
	b = strconv.AppendInt(b, size, 10)
	b = append(b, `,"mtime":"`...)
	b = appendTime(b, mtime)
	b = append(b, `","mode":"`...)
	m := mode & 0o7777
	b = append(b, byte('0'+m>>9), byte('0'+m>>6&7), byte('0'+m>>3&7), byte('0'+m&7))
	return append(b, `"}`...)
}
