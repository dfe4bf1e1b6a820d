package frontend

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What an approval question shows, and what the approval binds to: the
// call's effect. A tool with dry_run runs as a dry run, and the effect is
// each file its reply names, with the file's new sha256 and its diff. A
// tool that acts on an existing path without a dry run (fs_delete,
// fs_move, fs_copy: the argument declared existing) has that path's
// current state as its effect: a file's sha256, a directory's
// tree_sha256, a symlink's target.
//
// The sealed state carries the effect's digest. When the person accepts,
// the effect is computed again; if it differs (a file changed between the
// question and the answer), the call is refused with precondition_failed
// and nothing changes. The edits carry their own if_sha256, so the real
// call is refused too if the file changes after that second look; a
// delete or a move without one gets the sha256 (or tree_sha256) the
// person saw as its if_sha256 (or if_tree_sha256). What this does not
// cover: fs_copy takes no precondition, so a source changed in the
// moments between the second look and the copy is copied as it is then;
// a symlink, fifo or device is bound by its type and target only.

// effectFile is one path the question shows.
type effectFile struct {
	name []byte
	// what says what happens to it: "changed", "created", "deleted", or
	// for an existing path its type and digest.
	what string
	// sha256 is a file's new sha256 (a dry run) or its current one, or a
	// directory's tree_sha256; "" when there is none.
	sha256 string
	diff   []byte
	// binary: the diff is not text and is not shown; cut: the dry run's
	// reply cut the diff.
	binary, cut bool
}

// effect is what a call would change.
type effect struct {
	files []effectFile
	// guard is the precondition argument ("if_sha256" or
	// "if_tree_sha256") and value the real call gets when it has none.
	guard, guardValue string
}

// digest binds every byte the question shows of the effect.
func (e *effect) digest() [32]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, f := range e.files {
		field(f.name)
		field([]byte(f.what))
		field([]byte(f.sha256))
		field(f.diff)
		field([]byte(fmt.Sprint(f.binary, f.cut)))
	}
	field([]byte(e.guard))
	field([]byte(e.guardValue))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// effectOf computes the effect of the call req of t. An error (a
// precondition that fails already, a path that does not exist) refuses
// the call before anyone is asked. Neither a dry run's audit record nor
// its decision is kept.
func (s *server) effectOf(ctx context.Context, t *tool, req *mcp.CallToolRequest) (*effect, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, invalidf("arguments: %v", err)
	}
	if _, ok := t.schema.Properties["dry_run"]; ok {
		if string(args["dry_run"]) == "true" {
			return &effect{}, nil // changes nothing
		}
		return s.dryRunEffect(ctx, t, req, args)
	}
	var generic map[string]any
	json.Unmarshal(req.Params.Arguments, &generic)
	e := &effect{}
	for _, np := range t.callPaths(generic) {
		if !np.arg.existing {
			continue
		}
		f, sum, isDir, err := s.currentState(ctx, np.path)
		if err != nil {
			return nil, err
		}
		e.files = append(e.files, f)
		_, hasGuard := t.schema.Properties["if_tree_sha256"]
		if hasGuard && sum != "" && args["if_sha256"] == nil && args["if_tree_sha256"] == nil {
			e.guard, e.guardValue = "if_sha256", sum
			if isDir {
				e.guard = "if_tree_sha256"
			}
		}
	}
	return e, nil
}

// currentState describes what is at p now: a file's sha256, a directory's
// tree_sha256, a symlink's target. sum is the value a precondition takes.
func (s *server) currentState(ctx context.Context, p []byte) (f effectFile, sum string, isDir bool, err error) {
	f.name = displayPath(p)
	st, err := s.wc.Stat(ctx, &fsmcpv1.StatRequest{Path: p})
	if err != nil {
		return f, "", false, err
	}
	e := st.GetEntry()
	switch e.GetType() {
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		f.what, f.sha256 = fmt.Sprintf("file of %d bytes", e.GetSize()), st.GetSha256()
		return f, f.sha256, false, nil
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		stream, err := s.wc.Digest(ctx, &fsmcpv1.DigestRequest{Path: p})
		if err != nil {
			return f, "", false, err
		}
		d, err := finalMessage(stream, func(*fsmcpv1.Progress) {})
		if err != nil {
			return f, "", false, err
		}
		f.what = fmt.Sprintf("directory holding %d files, %d directories, %d bytes", d.GetFiles(), d.GetDirectories(), d.GetBytes())
		f.sha256 = d.GetTreeSha256()
		return f, f.sha256, true, nil
	case fsmcpv1.FileType_FILE_TYPE_SYMLINK:
		f.what = "symlink to " + quoteName(st.GetTarget())
		if st.GetTargetEscapes() {
			f.what = "symlink leading out of the root"
		}
		return f, "", false, nil
	}
	f.what = typeName(e.GetType())
	return f, "", false, nil
}

// dryRunEffect runs the call as a dry run and reads the files its reply
// names: fs_patch's files, or the one file of fs_write, fs_replace and
// fs_splice.
func (s *server) dryRunEffect(ctx context.Context, t *tool, req *mcp.CallToolRequest, args map[string]json.RawMessage) (*effect, error) {
	args["dry_run"] = json.RawMessage("true")
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, bug(err)
	}
	dry := &mcp.CallToolRequest{Session: req.Session, Params: withArguments(req.Params, raw), Extra: req.Extra}
	// The question bounds the diffs itself and counts what it leaves
	// out, so the dry run's reply is not cut at --max-response-bytes.
	whole, cfg := *s, *s.cfg
	cfg.MaxResponseBytes = link.MaxMessageBytes
	whole.cfg = &cfg
	doc, err := t.call(context.WithValue(ctx, recordKey{}, (*callRecord)(nil)), &whole, dry)
	if err != nil {
		return nil, err
	}
	type dryFile struct {
		Path          *string `json:"path"`
		PathBase64    *string `json:"path_base64"`
		Created       bool    `json:"created"`
		Deleted       bool    `json:"deleted"`
		SHA256        string  `json:"sha256"`
		Diff          *string `json:"diff"`
		DiffBase64    *string `json:"diff_base64"`
		DiffTruncated bool    `json:"diff_truncated"`
	}
	var answer struct {
		dryFile
		Files []dryFile `json:"files"`
	}
	if err := json.Unmarshal(doc.bytes(), &answer); err != nil {
		return nil, bug(err)
	}
	files := answer.Files
	if files == nil {
		files = []dryFile{answer.dryFile}
	}
	e := &effect{}
	for _, d := range files {
		f := effectFile{what: "changed", sha256: d.SHA256, cut: d.DiffTruncated}
		switch {
		case d.Path != nil:
			f.name = []byte(*d.Path)
		case d.PathBase64 != nil:
			if f.name, err = base64.StdEncoding.DecodeString(*d.PathBase64); err != nil {
				return nil, bug(err)
			}
		}
		switch {
		case d.Created:
			f.what = "created"
		case d.Deleted:
			f.what = "deleted"
		}
		switch {
		case d.Diff != nil:
			f.diff = []byte(*d.Diff)
		case d.DiffBase64 != nil:
			if f.diff, err = base64.StdEncoding.DecodeString(*d.DiffBase64); err != nil {
				return nil, bug(err)
			}
			f.binary = true
		}
		e.files = append(e.files, f)
	}
	return e, nil
}

// withGuard returns req with the effect's precondition added to its
// arguments, or req itself when there is none.
func (e *effect) withGuard(req *mcp.CallToolRequest) (*mcp.CallToolRequest, error) {
	if e.guard == "" {
		return req, nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, invalidf("arguments: %v", err)
	}
	v, err := json.Marshal(e.guardValue)
	if err != nil {
		return nil, bug(err)
	}
	args[e.guard] = v
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, bug(err)
	}
	c := *req
	c.Params = withArguments(req.Params, raw)
	return &c, nil
}

// withArguments returns a copy of params with other arguments, and
// without _meta.args_sha256, which covers the arguments as sent (and was
// checked on them).
func withArguments(params *mcp.CallToolParamsRaw, raw json.RawMessage) *mcp.CallToolParamsRaw {
	c := *params
	c.Arguments = raw
	c.Meta = nil
	for k, v := range params.Meta {
		if k != "args_sha256" {
			if c.Meta == nil {
				c.Meta = mcp.Meta{}
			}
			c.Meta[k] = v
		}
	}
	return &c
}
