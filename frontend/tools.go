package frontend

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"time"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/metadata"
)

// server is the MCP server's state shared by every tool call.
type server struct {
	cfg *Config
	wc  *workerClient
	// ec is the command runner's client; nil when commands are off.
	ec          *execClient
	confinement *fsmcpv1.Confinement
	// wrap, when set, wraps every tool handler. Tests use it to inject
	// faults; production leaves it nil.
	wrap func(name string, h mcp.ToolHandler) mcp.ToolHandler
	// audit records every call; nil records nothing.
	audit *auditLog
	// approvals asks the person before the calls --ask names; nil asks
	// nothing.
	approvals *approvals
	// stdio is the stdio connection, nil over HTTP.
	stdio *stdioConn
}

// tool is one MCP tool: its metadata, strict input schema and handler.
type tool struct {
	name string
	// title is the short human-readable name hosts show (MCP's title).
	title       string
	description string
	readOnly    bool
	destructive bool
	idempotent  bool
	schema      *jsonschema.Schema
	resolved    *jsonschema.Resolved
	// maxArgs bounds the raw arguments.
	maxArgs int
	// decode validates the raw arguments and decodes them into the
	// tool's input type: through typed when it covers the tool's schema
	// and is sure of the arguments, else through decodeFull.
	decode func(ctx context.Context, req *mcp.CallToolRequest) (any, error)
	// typed decodes and checks arguments in one pass (args.go); nil when
	// the schema asks for more than it checks.
	typed *typedArgs
	// newInput returns a new *In.
	newInput func() any
	// decodeFull validates the arguments against the schema, explaining
	// a refusal, and decodes them; it returns the decoded arguments too.
	decodeFull func(raw json.RawMessage) (any, map[string]any, error)
	// call decodes, then runs the tool.
	call func(ctx context.Context, s *server, req *mcp.CallToolRequest) (*obj, error)
	// ownDeadline: the tool bounds its own call (a command's timeout_s
	// may exceed --call-timeout), so the handler sets none.
	ownDeadline bool
	// enabled, when set, says whether a configuration serves the tool.
	enabled func(*Config) bool
	// pathArgs declares the arguments that name paths (see paths);
	// pathsDeclared says the tool was given its declaration.
	pathArgs      []pathDecl
	pathsDeclared bool
}

// pathKind is how an argument names paths.
type pathKind int

const (
	// kindOne: a path, or its _base64 twin.
	kindOne pathKind = iota
	// kindList: an array whose items are each a path or
	// {"path_base64": ...} (fs_read_many's paths).
	kindList
	// kindKeys: an object keyed by paths, and its _base64 twin keyed by
	// paths as base64 (fs_patch's if_sha256: the worker refuses a patch
	// unless its keys are exactly the files the patch touches, so they
	// name them as the worker's own parser read them).
	kindKeys
	// kindUnder: an array of paths relative to the tool's path argument
	// (fs_vcs_*'s files). The audit names them; they are not judged on
	// their own: the command runs at path.
	kindUnder
)

// pathDecl declares one argument of a tool that names paths. The one
// declaration serves the audit line, --rules (the front-end's permit and
// the worker's Check) and the approval question, so that no tool is
// audited by one list and judged by another.
type pathDecl struct {
	name string
	kind pathKind
	// label is the key the audit line names the paths under.
	label string
	// existing: the call acts on what is at the path now (it deletes,
	// moves or copies it), so an approval question shows its current
	// state and binds to it (approve_effect.go).
	existing bool
}

// acted marks d as naming a path whose current state the call acts on.
func (d pathDecl) acted() pathDecl {
	d.existing = true
	return d
}

func onePath(name string) pathDecl     { return pathDecl{name: name, kind: kindOne, label: name} }
func listOfPaths(name string) pathDecl { return pathDecl{name: name, kind: kindList, label: name} }
func pathsUnder(name string) pathDecl  { return pathDecl{name: name, kind: kindUnder, label: name} }

// keyedPaths declares a path-keyed object; the audit names its keys as
// files.
func keyedPaths(name string) pathDecl { return pathDecl{name: name, kind: kindKeys, label: "files"} }

// paths declares the tool's path arguments and returns it, so that a
// declaration's tool() reads newTool(...).titled(title).paths(args...).
// A tool that names no path declares paths() all the same.
func (t *tool) paths(args ...pathDecl) *tool {
	t.pathArgs, t.pathsDeclared = args, true
	if t.typed != nil {
		t.typed.paths = nil
		for _, tf := range t.typed.fields {
			for _, a := range args {
				if tf.name == a.name || tf.name == a.name+"_base64" {
					t.typed.paths = append(t.typed.paths, tf)
				}
			}
		}
	}
	return t
}

// namedPath is one path a call names.
type namedPath struct {
	arg *pathDecl
	// path is as given (before the worker strips a leading "/").
	path []byte
}

// callPaths returns every path args (the call's decoded arguments) names,
// in the order of the declaration. A value the tool would refuse (not
// base64, not a string) names nothing.
func (t *tool) callPaths(args map[string]any) []namedPath {
	var out []namedPath
	for i := range t.pathArgs {
		a := &t.pathArgs[i]
		a.each(args, func(p []byte) { out = append(out, namedPath{arg: a, path: p}) })
	}
	return out
}

// each calls add with every path a's argument names in args.
func (a *pathDecl) each(args map[string]any, add func(p []byte)) {
	switch a.kind {
	case kindOne:
		if s, ok := args[a.name].(string); ok {
			add([]byte(s))
		} else if s, ok := args[a.name+"_base64"].(string); ok {
			if p, err := base64.StdEncoding.DecodeString(s); err == nil {
				add(p)
			}
		}
	case kindList, kindUnder:
		items, _ := args[a.name].([]any)
		for _, v := range items {
			switch v := v.(type) {
			case string:
				add([]byte(v))
			case map[string]any:
				if s, ok := v["path_base64"].(string); ok {
					if p, err := base64.StdEncoding.DecodeString(s); err == nil {
						add(p)
					}
				}
			}
		}
	case kindKeys:
		text, _ := args[a.name].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(text)) {
			add([]byte(k))
		}
		b64, _ := args[a.name+"_base64"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(b64)) {
			if p, err := base64.StdEncoding.DecodeString(k); err == nil {
				add(p)
			}
		}
	}
}

// judgedPaths returns the paths --rules judges: every path the call
// names relative to the root.
func (t *tool) judgedPaths(args map[string]any) [][]byte {
	var out [][]byte
	for _, np := range t.callPaths(args) {
		if np.arg.kind != kindUnder {
			out = append(out, np.path)
		}
	}
	return out
}

// toolDecl declares one tool, whole: its name, title and description,
// its hints, the arguments that name paths, when a configuration serves
// it, and its handler. The input schema is inferred from In's json and
// jsonschema tags: inferred struct schemas refuse unknown properties, and
// fields without omitempty are required. A tool's file, tool_<name>.go,
// holds In, its one toolDecl and its handler.
type toolDecl[In any] struct {
	name string
	// title is the short human-readable name hosts show (MCP's title).
	title       string
	description string
	hints       hints
	// paths declares the arguments that name paths; the audit, --rules,
	// Check and the approval all read it. A tool that names no path
	// leaves it empty.
	paths []pathDecl
	// enabled, when set, says whether a configuration serves the tool.
	enabled func(*Config) bool
	// ownDeadline: the tool bounds its own call, so the handler sets none.
	ownDeadline bool
	run         func(s *server, ctx context.Context, in *In, req *mcp.CallToolRequest) (*obj, error)
}

// hints are MCP's tool annotations; --ask's classes (writes,
// destructive) and --tool-help read them too.
type hints struct {
	readOnly, destructive, idempotent bool
}

// declaration is a toolDecl of any input type.
type declaration interface {
	tool() *tool
}

// tool builds the tool d declares.
func (d toolDecl[In]) tool() *tool {
	t := newTool(d.name, d.description, d.hints, d.run).titled(d.title).paths(d.paths...)
	t.enabled, t.ownDeadline = d.enabled, d.ownDeadline
	return t
}

// newTool makes the tool whose input is In.
func newTool[In any](name, description string, h hints,
	run func(s *server, ctx context.Context, in *In, req *mcp.CallToolRequest) (*obj, error)) *tool {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("BUG(fsmcp): schema of %s: %v", name, err))
	}
	// A tool without arguments (fs_checkpoints) still lists its properties,
	// none: clients read an object schema's properties.
	if schema.Properties == nil {
		schema.Properties = map[string]*jsonschema.Schema{}
	}
	// An optional field is a *T so that absence is visible; absence is
	// how a client omits it, so null is refused. Only required fields
	// (if_sha256) keep the null the pointer type implies.
	for name, prop := range schema.Properties {
		if !slices.Contains(schema.Required, name) && len(prop.Types) == 2 && prop.Types[0] == "null" {
			prop.Type, prop.Types = prop.Types[1], nil
		}
	}
	refineSchema(schema)
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("BUG(fsmcp): resolve schema of %s: %v", name, err))
	}
	t := &tool{name: name, description: description, readOnly: h.readOnly, destructive: h.destructive,
		idempotent: h.idempotent, schema: schema, resolved: resolved}
	// Only file content makes arguments large: the other tools' arguments
	// are refused unread past maxSmallArguments, before any decoding.
	maxArgs := maxSmallArguments
	for _, big := range []string{"content", "edits", "insert", "patch"} {
		if _, ok := schema.Properties[big]; ok {
			maxArgs = link.MaxMessageBytes
		}
	}
	t.maxArgs = maxArgs
	t.newInput = func() any { return new(In) }
	t.typed = newTypedArgs(reflect.TypeFor[In](), schema)
	t.decodeFull = func(raw json.RawMessage) (any, map[string]any, error) {
		args, err := validateArguments(raw, resolved)
		if err != nil {
			return nil, nil, err
		}
		in := new(In)
		if err := json.Unmarshal(raw, in); err != nil {
			return nil, nil, invalidf("arguments: %v", err)
		}
		m, _ := args.(map[string]any)
		return in, m, nil
	}
	t.decode = func(ctx context.Context, req *mcp.CallToolRequest) (any, error) {
		if n := len(req.Params.Arguments); n > maxArgs {
			return nil, argumentsTooLarge(n, maxArgs)
		}
		raw, err := rawArguments(req)
		if err != nil {
			return nil, err
		}
		var in any
		var args map[string]any
		if typed := new(In); t.typed != nil && t.typed.decode(raw, typed) {
			in, args = typed, t.typed.auditArgs(typed)
		} else if in, args, err = t.decodeFull(raw); err != nil {
			return nil, err
		}
		if rec := recordOf(ctx); rec != nil && args != nil {
			rec.args = args // the audit line reads its paths from here
		}
		return in, nil
	}
	t.call = func(ctx context.Context, s *server, req *mcp.CallToolRequest) (*obj, error) {
		in, err := t.decode(ctx, req)
		if err != nil {
			return nil, err
		}
		return run(s, ctx, in.(*In), req)
	}
	return t
}

// titled sets the tool's title and returns it, so that a definition
// reads newTool(...).titled("Read file").
func (t *tool) titled(title string) *tool {
	t.title = title
	return t
}

// rawArguments verifies _meta.args_sha256 over the exact received bytes,
// and that they hold only text a decoder would not repair; the arguments
// are then validated against the tool's schema (typedArgs.decode or
// validateArguments). Nothing reaches the worker unless all pass.
func rawArguments(req *mcp.CallToolRequest) (json.RawMessage, error) {
	raw := req.Params.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if want, ok := req.Params.Meta["args_sha256"]; ok {
		ws, ok := want.(string)
		if !ok || !link.IsSHA256Hex(ws) {
			return nil, invalidf("_meta.args_sha256 must be 64 lowercase hex digits")
		}
		sum := sha256.Sum256(raw)
		if got := hex.EncodeToString(sum[:]); got != ws {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_ARGS_MISMATCH,
				"the arguments received hash to %s, not to _meta.args_sha256", got)
		}
	}
	// encoding/json would silently repair invalid UTF-8 and lone
	// surrogates to U+FFFD; a repaired name must never address a file.
	if !utf8.Valid(raw) {
		return nil, invalidf("arguments are not valid UTF-8; use the _base64 form of a path")
	}
	if err := checkSurrogates(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// validateArguments decodes raw and validates it against the tool's
// schema, explaining a refusal.
func validateArguments(raw json.RawMessage, resolved *jsonschema.Resolved) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, invalidf("arguments: %v", err)
	}
	if err := resolved.Validate(v); err != nil {
		return nil, invalidf("%s", explainInvalid(resolved.Schema(), v, err))
	}
	return v, nil
}

// checkSurrogates refuses a \u escape of a UTF-16 surrogate that is not
// part of a valid pair. raw must be syntactically valid JSON for the answer
// to mean anything; json.Unmarshal checks that afterwards.
func checkSurrogates(raw []byte) error {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(raw):
			if raw[i+1] != 'u' {
				i++
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				return invalidf("arguments: bad \\u escape")
			}
			i += 5
			switch {
			case r >= 0xdc00 && r <= 0xdfff:
				return invalidf("arguments: lone UTF-16 surrogate; use the _base64 form of a path")
			case r >= 0xd800 && r <= 0xdbff:
				lo, ok := hex4(raw, i+3)
				if !ok || raw[i+1] != '\\' || raw[i+2] != 'u' || lo < 0xdc00 || lo > 0xdfff {
					return invalidf("arguments: lone UTF-16 surrogate; use the _base64 form of a path")
				}
				i += 6
			}
		}
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	v, err := hex.DecodeString(string(b[at : at+4]))
	if err != nil {
		return 0, false
	}
	return rune(v[0])<<8 | rune(v[1]), true
}

func argumentsTooLarge(n, limit int) *toolError {
	return invalidf("arguments of %d bytes exceed the %d this tool accepts", n, limit)
}

// maxSmallArguments bounds the raw arguments of a tool without file
// content: paths and patterns are at most 64 KiB each.
const maxSmallArguments = 1 << 20

// maxPathBytes bounds a path argument. os.Root resolves one component at
// a time, so a path may be longer than PATH_MAX, but not without limit.
const maxPathBytes = 64 << 10

// pathArg returns the path named by a text field or its _base64 twin.
func pathArg(field string, text, b64 *string) ([]byte, error) {
	if (text != nil && len(*text) > maxPathBytes) || (b64 != nil && len(*b64) > maxPathBytes*4/3+4) {
		return nil, invalidf("%s must be at most %d bytes long", field, maxPathBytes)
	}
	switch {
	case text != nil && b64 != nil:
		return nil, invalidf("give %s or %s_base64, not both: they name the same argument", field, field)
	case b64 != nil:
		p, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, invalidf("%s_base64 must be standard base64 (RFC 4648, with padding)", field)
		}
		return p, nil
	case text != nil:
		return []byte(*text), nil
	}
	return nil, nil
}

// displayPath is the path as the worker resolves it: one leading "/"
// stripped.
func displayPath(p []byte) []byte {
	if len(p) > 0 && p[0] == '/' {
		return p[1:]
	}
	return p
}

// registered returns the tools the configuration serves: all of them, or
// only the read tools. Serving and --tool-help both ask it.
func (c *Config) registered(tools []*tool) []*tool {
	var out []*tool
	for _, t := range tools {
		if c.ReadOnly && !t.readOnly || t.enabled != nil && !t.enabled(c) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// register adds the tools the configuration serves to srv.
func (s *server) register(srv *mcp.Server, tools []*tool) {
	f := false
	for _, t := range s.cfg.registered(tools) {
		destructive := t.destructive
		mt := &mcp.Tool{
			Name:        s.cfg.ToolsPrefix + t.name,
			Title:       t.title,
			Description: prefixToolNames(t.description, s.cfg.ToolsPrefix),
			InputSchema: t.schema,
			Annotations: &mcp.ToolAnnotations{
				ReadOnlyHint:    t.readOnly,
				DestructiveHint: &destructive,
				IdempotentHint:  t.idempotent,
				OpenWorldHint:   &f,
			},
		}
		if s.cfg.StructuredContent {
			mt.OutputSchema = outputSchema(t.name)
		}
		if s.stdio != nil {
			s.stdio.maxArgs[mt.Name] = t.maxArgs
		}
		h := s.handler(t)
		if s.wrap != nil {
			h = s.wrap(t.name, h)
		}
		srv.AddTool(mt, s.audit.wrap(t, recovered(t.name, h)))
	}
}

// recovered answers a panic in h with internal; the process carries on.
func recovered(name string, h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(os.Stderr, "fsmcp: panic in %s: %v\n%s", name, r, debug.Stack())
				res, err = errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "internal error")), nil
			}
		}()
		return h(ctx, req)
	}
}

// handler runs t with a deadline and renders the reply.
func (s *server) handler(t *tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		defer cancel()
		rec := recordOf(ctx)
		fail := func(te *toolError) *mcp.CallToolResult {
			res := errorResult(te)
			if rec != nil {
				rec.outcome = codeName(te.code)
				rec.replyBytes = int64(len(res.Content[0].(*mcp.TextContent).Text))
				rec.res = res
			}
			return res
		}
		if s.approvals != nil {
			run, md, res := s.permit(cctx, t, req)
			if res != nil {
				return res, nil
			}
			req = run
			// With --rules the call carries its tool and what Check
			// judged, for the worker to judge again (worker/callrules.go).
			if md != nil {
				ctx, cctx = metadata.NewOutgoingContext(ctx, md), metadata.NewOutgoingContext(cctx, md)
			}
		}
		if !t.ownDeadline {
			ctx = cctx
		}
		ctx, evicted := withEvicted(ctx)
		doc, cerr := t.call(ctx, s, req)
		if cerr != nil {
			return fail(s.callError(ctx, cerr)), nil
		}
		evicted.add(doc)
		size := int64(doc.size())
		if size > s.cfg.MaxResponseBytes {
			return fail(errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "the reply would exceed --max-response-bytes")), nil
		}
		res := okResult(doc)
		if rec != nil {
			rec.outcome, rec.replyBytes, rec.res = "ok", size, res
		}
		return res, nil
	}
}

// callError maps an error, telling a call's own deadline from the client's
// cancellation.
func (s *server) callError(ctx context.Context, err error) *toolError {
	te := fromRPC(err)
	if te.code == fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED && ctx.Err() == context.DeadlineExceeded {
		te = errf(fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT, "the call exceeded --call-timeout")
	}
	if len(te.missingDirectory) > 0 {
		// What to do about it, in the tool names the client was given.
		c := *te
		c.message += prefixToolNames("; the directory missing_directory names does not exist: "+
			"create it with fs_mkdir, then call again", s.cfg.ToolsPrefix)
		te = &c
	}
	return te
}

// callSlotWait bounds how long a call waits for a slot (callGate).
const callSlotWait = 10 * time.Second

// The bounds of callGate when the configuration leaves them unset (a
// Config not made by parseFlags); the flags default to the same.
const (
	defaultMaxCalls        = 64
	defaultMaxSessionCalls = 16
)

// callGate bounds the calls running at once as configured.
func (s *server) callGate() *callGate {
	perServer, perSession, wait := s.cfg.MaxCalls, s.cfg.MaxSessionCalls, callSlotWait
	if perServer <= 0 {
		perServer = defaultMaxCalls
	}
	if perSession <= 0 {
		perSession = min(defaultMaxSessionCalls, perServer)
	}
	if s.cfg.CallTimeout > 0 {
		wait = min(wait, s.cfg.CallTimeout)
	}
	return newCallGate(perServer, perSession, wait)
}

// allTools lists every tool in the order tools/list shows them.
func allTools() []*tool {
	var ts []*tool
	for _, d := range []declaration{
		statTool, listTool, readTool, readManyTool, globTool, grepTool, treeTool, viewTool,
		writeTool, replaceTool, mkdirTool, moveTool, deleteTool,
		spliceTool, patchTool, copyTool, digestTool, undoTool,
		checkpointTool, rewindTool, checkpointsTool,
	} {
		ts = append(ts, d.tool())
	}
	return ts
}

func (s *server) build() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fsmcp", Version: Version}, &mcp.ServerOptions{
		Instructions: "Tools over one directory. Paths are relative to it. Every reply is one JSON document.",
		// Only what the server uses: tools, whose list never changes.
		// No logging (nothing is logged to the client), no resources,
		// prompts or completions.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	srv.AddReceivingMiddleware(undeclaredMethods)
	tools := append(allTools(), commandTools(s.cfg)...)
	if asked, err := askedTools(s.cfg.Ask, s.cfg.ToolsPrefix, tools); err != nil {
		panic("BUG(fsmcp): --ask passed check but not build: " + err.Error())
	} else if asked != nil || s.cfg.Rules != "" {
		s.approvals = newApprovals(asked)
	}
	s.register(srv, tools)
	gate := s.callGate()
	// Outermost first: the encoder sees every tool result, the gate's
	// refusals included, and so does structuredResults.
	if s.cfg.StructuredContent {
		srv.AddReceivingMiddleware(encodeResult(s.stdio), structuredResults, gate.middleware)
	} else {
		srv.AddReceivingMiddleware(encodeResult(s.stdio), gate.middleware)
	}
	return srv
}

func boolArg(b *bool) bool { return b != nil && *b }

// excludeArg checks a list of exclusion globs.
func excludeArg(globs []string) error {
	for _, g := range globs {
		if g == "" {
			return invalidf("exclude: an empty glob excludes nothing")
		}
	}
	return nil
}

// requiredPath is pathArg for a path that must be given.
func requiredPath(field string, text, b64 *string) ([]byte, error) {
	if text == nil && b64 == nil {
		return nil, invalidf("%s is required: a path relative to the root, such as \"src/main.go\", or \".\" for the root itself; "+
			"%s_base64 for a name that is not UTF-8", field, field)
	}
	return pathArg(field, text, b64)
}

// rootedPath is pathArg for a tool that works on a directory: left out, it
// is the root, for clients that cannot send an empty string.
func rootedPath(field string, text, b64 *string) ([]byte, error) {
	if text == nil && b64 == nil {
		return []byte{}, nil
	}
	return pathArg(field, text, b64)
}
