package frontend

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fs_read_many: several files in one call, in the order asked, each entry
// the ordinary fs_read reply or its own error document, all within one
// reply bound. Entries are whole while they fit; the first that does not
// is cut (truncated, with next_offset) if any of it fits, and the ones
// after it are left out: complete says how many came whole.

type readManyIn struct {
	Paths  []any  `json:"paths" jsonschema:"1 to 64 files, each a path or {\"path_base64\": ...}"`
	Length *int64 `json:"length,omitempty" jsonschema:"bytes per file; default: as much as fits"`
}

const maxReadManyPaths = 64

var readManyTool = toolDecl[readManyIn]{
	name:  "fs_read_many",
	title: "Read files",
	description: "Read several files in one call, in order: each entry is what fs_read returns for " +
		"it, or its own error. complete says how many entries came whole; a cut entry carries next_offset (continue it " +
		"with fs_read), and paths after it were not read: ask for them again.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{listOfPaths("paths")},
	run:   (*server).readMany,
}

// manyPath is one entry of paths: a path, or {"path_base64": ...}.
func manyPath(i int, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return pathArg("path", &v, nil)
	case map[string]any:
		b, ok := v["path_base64"].(string)
		if ok && len(v) == 1 {
			return pathArg("path", nil, &b)
		}
	}
	return nil, invalidf("paths[%d] must be a path or {\"path_base64\": ...}", i)
}

func (s *server) readMany(ctx context.Context, in *readManyIn, _ *mcp.CallToolRequest) (*obj, error) {
	if len(in.Paths) == 0 || len(in.Paths) > maxReadManyPaths {
		return nil, invalidf("paths must hold 1 to %d files", maxReadManyPaths)
	}
	bound := s.cfg.MaxResponseBytes
	req := &fsmcpv1.ReadManyRequest{}
	for i, v := range in.Paths {
		p, err := manyPath(i, v)
		if err != nil {
			return nil, err
		}
		r, err := readRequest(p, &readIn{Length: in.Length}, bound)
		if err != nil {
			return nil, err
		}
		req.Reads = append(req.Reads, r)
	}
	resp, err := s.wc.ReadMany(ctx, req)
	if err != nil {
		return nil, err
	}
	max := int(bound)
	doc := pageObj(max)
	doc.bool("ok", true)
	doc.key("files")
	doc.b = append(doc.b, '[')
	tail := len(`],"complete":,"truncated":true}`) + 20
	complete, listed := 0, 0
	cut := false
	for i, res := range resp.GetResults() {
		r := req.Reads[i]
		head := newObj()
		var item *obj
		whole := true
		var refused *toolError
		if e := res.GetError(); e != nil {
			refused = toolErrorOf(link.FromDetail(e))
			item = head.bool("ok", false).name("path", displayPath(r.GetPath())).object("error", errorDoc(refused))
		} else {
			head.bool("ok", true).name("path", displayPath(r.GetPath()))
			var n int
			var truncated bool
			item, n, truncated = readReply(head, r, in.Length, res.GetRead(), max-len(doc.b)-1-tail, 0)
			whole = !truncated
			if truncated && n == 0 {
				cut = true // not one byte of it fits
				break
			}
		}
		b := item.bytes()
		if len(doc.b)+1+len(b)+tail > max {
			cut = true
			break
		}
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = append(doc.b, b...)
		listed++
		if refused != nil {
			// A relay audits the call by its _meta, as for a lone fs_read.
			doc.meta = violationMeta(doc.meta, refused)
		}
		if !whole {
			cut = true
			break
		}
		complete++
	}
	doc.b = append(doc.b, ']')
	doc.int("complete", int64(complete))
	if cut || listed < len(req.Reads) {
		doc.bool("truncated", true)
	}
	if listed == 0 {
		return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "not even the first entry fits in --max-response-bytes")
	}
	return doc, nil
}
