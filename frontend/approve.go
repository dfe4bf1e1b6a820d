package frontend

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"weak"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Approvals: --ask SPEC makes a call wait for the person at the client.
//
// The request travels as an MCP form elicitation returned in the tool's
// result (InputRequests, SEP-2322). Under protocol 2026-07-28 the client
// answers by retrying the call with inputResponses and the requestState it
// was given; for older clients (2025-11-25 and before) go-sdk's server
// middleware sends elicitation/create itself and re-invokes the handler
// once with the answer. Either way the handler runs twice and sees the same
// thing on its second run: the answer and the state.
//
// The state is the server's own, sealed with a key drawn at start: it binds
// the session, the tool and the exact arguments, expires, and is accepted
// once. A client cannot approve a call it was not asked about, approve a
// different call with another call's answer, or answer twice.
//
// It does not prevent a client from answering for the person: the answer
// comes from the client's software, and fsmcp cannot tell a person's click
// from a program's. Elicitation is the person's channel only as far as the
// client keeps it so.

// askInputID names fsmcp's one input request in a result.
const askInputID = "approve"

// askLifetime bounds how long a person may take to answer.
const askLifetime = 15 * time.Minute

// askSpecs are the classes --ask accepts besides tool names.
var askSpecs = []string{"writes", "destructive", "exec"}

// execTools run programs: the exec class of --ask.
var execTools = []string{"fs_exec", "fs_vcs_status", "fs_vcs_diff"}

// askedTools resolves --ask specs to the tool names (unprefixed) they
// cover, refusing a spec that names no tool and no class.
func askedTools(specs []string, prefix string, tools []*tool) (map[string]bool, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	asked := map[string]bool{}
	for _, spec := range specs {
		name := strings.TrimPrefix(spec, prefix)
		found := false
		for _, t := range tools {
			var match bool
			switch spec {
			case "writes":
				match, found = !t.readOnly, true
			case "destructive":
				match, found = t.destructive, true
			case "exec":
				match, found = slices.Contains(execTools, t.name), true
			default:
				match = t.name == name
				found = found || match
			}
			if match {
				asked[t.name] = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--ask %q: not a tool name nor one of %s", spec, strings.Join(askSpecs, ", "))
		}
	}
	return asked, nil
}

// approvals holds what --ask needs while serving: which tools ask, the
// sealing key, the states already answered, and what each session allowed
// for its remaining life.
type approvals struct {
	asked map[string]bool
	key   [32]byte

	mu sync.Mutex
	// used holds the nonces of answered states until they expire.
	used map[[16]byte]time.Time
	// allowed holds, per session, the tools the person allowed for the
	// rest of it. A session that goes away takes its entry with it.
	allowed map[weak.Pointer[mcp.ServerSession]]map[string]bool
}

func newApprovals(asked map[string]bool) *approvals {
	a := &approvals{asked: asked, used: map[[16]byte]time.Time{},
		allowed: map[weak.Pointer[mcp.ServerSession]]map[string]bool{}}
	rand.Read(a.key[:])
	return a
}

// needed reports whether a call of tool waits for the person.
func (a *approvals) needed(tool string) bool { return a != nil && a.asked[tool] }

func (a *approvals) sessionAllows(ss *mcp.ServerSession, tool string) bool {
	if ss == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allowed[weak.Make(ss)][tool]
}

func (a *approvals) allowForSession(ss *mcp.ServerSession, tool string) {
	if ss == nil {
		return
	}
	wp := weak.Make(ss)
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.allowed[wp]
	if m == nil {
		m = map[string]bool{}
		a.allowed[wp] = m
		runtime.AddCleanup(ss, func(wp weak.Pointer[mcp.ServerSession]) {
			a.mu.Lock()
			delete(a.allowed, wp)
			a.mu.Unlock()
		}, wp)
	}
	m[tool] = true
}

// stateLen is the sealed state's length before encoding: expiry (8),
// nonce (16), MAC (32).
const stateLen = 8 + 16 + 32

// seal returns a fresh state for this call.
func (a *approvals) seal(binding [32]byte, now time.Time) string {
	var b [stateLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.Add(askLifetime).UnixNano()))
	rand.Read(b[8:24])
	copy(b[24:], a.mac(b[:24], binding))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (a *approvals) mac(head []byte, binding [32]byte) []byte {
	m := hmac.New(sha256.New, a.key[:])
	m.Write([]byte("fsmcp approval v1\x00"))
	m.Write(head)
	m.Write(binding[:])
	return m.Sum(nil)
}

// open checks a state against this call and consumes it: a state is
// accepted once, before it expires, for the call it was made for.
func (a *approvals) open(state string, binding [32]byte, now time.Time) error {
	b, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil || len(b) != stateLen || !hmac.Equal(b[24:], a.mac(b[:24], binding)) {
		return errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
			"the approval's requestState was not issued for this call (tool, arguments, session and where the paths lead must be those asked about)")
	}
	expires := time.Unix(0, int64(binary.BigEndian.Uint64(b[:8])))
	if now.After(expires) {
		return errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, "the approval expired; call the tool again to be asked anew")
	}
	var nonce [16]byte
	copy(nonce[:], b[8:24])
	a.mu.Lock()
	defer a.mu.Unlock()
	for n, exp := range a.used {
		if now.After(exp) {
			delete(a.used, n)
		}
	}
	if _, ok := a.used[nonce]; ok {
		return errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, "the approval was already used; call the tool again to be asked anew")
	}
	a.used[nonce] = expires
	return nil
}

// callBinding digests what an approval is for: the session, the tool, the
// arguments in canonical form (keys sorted, numbers as written), so a
// client that re-encodes the same arguments still matches, and the real
// paths --rules resolved them to, so that an approval does not carry over
// to a call whose paths lead elsewhere by the time it is retried.
func callBinding(req *mcp.CallToolRequest, tool string, judged []*fsmcpv1.JudgedPath) ([32]byte, error) {
	raw := req.Params.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return [32]byte{}, invalidf("arguments: %v", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return [32]byte{}, invalidf("arguments: %v", err)
	}
	h := sha256.New()
	if req.Session != nil {
		h.Write([]byte(req.Session.ID()))
	}
	h.Write([]byte{0})
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canon)
	for _, j := range judged {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(j.GetName())))
		h.Write(n[:])
		h.Write(j.GetName())
		binary.BigEndian.PutUint64(n[:], uint64(len(j.GetPath())))
		h.Write(n[:])
		h.Write(j.GetPath())
		binary.BigEndian.PutUint64(n[:], uint64(j.GetAction()))
		h.Write(n[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

// Decisions, as the audit log records them.
const (
	decisionAsked       = "asked"
	decisionAccepted    = "accepted"
	decisionAllowed     = "allowed"
	decisionDeclined    = "declined"
	decisionCancelled   = "cancelled"
	decisionNoElicit    = "no_elicitation"
	decisionBadApproval = "bad_approval"
	// By a --rules line.
	decisionDeniedByRule  = "denied_by_rule"
	decisionAllowedByRule = "allowed_by_rule"
)

// approve runs before a call of t that needs the person. It returns nil
// when the call may run, else the result to answer with: the input request
// that asks, or permission_denied. judged are the real paths --rules
// resolved the call's paths to: the question shows them and the approval
// is bound to them.
func (s *server) approve(ctx context.Context, t *tool, req *mcp.CallToolRequest, judged []*fsmcpv1.JudgedPath) *mcp.CallToolResult {
	// Arguments that fail validation are refused before anyone is asked.
	if _, err := t.decode(ctx, req); err != nil {
		return errorResult(asToolError(err))
	}
	a := s.approvals
	if a.sessionAllows(req.Session, t.name) {
		noteDecision(ctx, decisionAllowed)
		return nil
	}
	binding, err := callBinding(req, t.name, judged)
	if err != nil {
		return errorResult(asToolError(err))
	}
	now := time.Now()
	if state := req.Params.RequestState; state != "" {
		if err := a.open(state, binding, now); err != nil {
			noteDecision(ctx, decisionBadApproval)
			return errorResult(asToolError(err))
		}
		answer, _ := req.Params.InputResponses[askInputID].(*mcp.ElicitResult)
		switch {
		case answer == nil:
			noteDecision(ctx, decisionBadApproval)
			return errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
				"the retried call carries no answer to the approval request %q", askInputID))
		case answer.Action == "accept":
			if remember, _ := answer.Content["remember"].(bool); remember {
				a.allowForSession(req.Session, t.name)
			}
			noteDecision(ctx, decisionAccepted)
			return nil
		case answer.Action == "decline":
			noteDecision(ctx, decisionDeclined)
			return errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
				"the person declined this %s call; nothing was changed", s.cfg.ToolsPrefix+t.name))
		default:
			noteDecision(ctx, decisionCancelled)
			return errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
				"the person dismissed the approval of this %s call without allowing it; nothing was changed", s.cfg.ToolsPrefix+t.name))
		}
	}
	if !canElicitForm(req.ClientCapabilities()) {
		noteDecision(ctx, decisionNoElicit)
		return errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
			"%s needs the person's approval (--ask), and this client did not declare the elicitation capability (form mode) to ask it",
			s.cfg.ToolsPrefix+t.name))
	}
	// An edit is shown as its diff: the tool runs as a dry run first,
	// which also refuses, unasked, a call that could not succeed.
	diff, err := s.preview(ctx, t, req)
	if err != nil {
		return errorResult(asToolError(err))
	}
	noteDecision(ctx, decisionAsked)
	name := s.cfg.ToolsPrefix + t.name
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{askInputID: &mcp.ElicitParams{
			Mode:    "form",
			Message: askMessage(name, t, req.Params.Arguments, judged, diff),
			RequestedSchema: &jsonschema.Schema{
				Type: "object",
				Properties: map[string]*jsonschema.Schema{
					"remember": {
						Type:        "boolean",
						Title:       "Allow " + name + " for the rest of this session",
						Description: "Without it, only this one call is allowed.",
						Default:     json.RawMessage("false"),
					},
				},
			},
		}},
		RequestState: a.seal(binding, now),
	}
}

// preview runs a tool that has dry_run as a dry run of this call and
// returns the diff it answers (with a note when the reply cut it, or when
// the content is not text). A call that is itself a dry run, or a tool
// without dry_run, has none. The dry run's own audit record is not kept.
func (s *server) preview(ctx context.Context, t *tool, req *mcp.CallToolRequest) (string, error) {
	if _, ok := t.schema.Properties["dry_run"]; !ok {
		return "", nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return "", invalidf("arguments: %v", err)
	}
	if string(args["dry_run"]) == "true" {
		return "", nil
	}
	args["dry_run"] = json.RawMessage("true")
	raw, err := json.Marshal(args)
	if err != nil {
		return "", bug(err)
	}
	params := *req.Params
	params.Arguments = raw
	params.Meta = nil // _meta.args_sha256 covers the call's own arguments
	dry := &mcp.CallToolRequest{Session: req.Session, Params: &params, Extra: req.Extra}
	doc, err := t.call(context.WithValue(ctx, recordKey{}, (*callRecord)(nil)), s, dry)
	if err != nil {
		return "", err
	}
	var answer struct {
		Diff          *string `json:"diff"`
		DiffBase64    *string `json:"diff_base64"`
		DiffTruncated bool    `json:"diff_truncated"`
	}
	if err := json.Unmarshal(doc.bytes(), &answer); err != nil {
		return "", bug(err)
	}
	var diff string
	switch {
	case answer.Diff != nil:
		diff = *answer.Diff
	case answer.DiffBase64 != nil:
		diff = "(the content is not text: the diff is binary)"
	}
	if answer.DiffTruncated {
		diff += "\n…(the diff goes on)"
	}
	return diff, nil
}

// canElicitForm reports whether the client declared form elicitation
// (an elicitation capability naming neither mode means form).
func canElicitForm(c *mcp.ClientCapabilities) bool {
	if c == nil || c.Elicitation == nil {
		return false
	}
	return c.Elicitation.Form != nil || c.Elicitation.URL == nil
}

func asToolError(err error) *toolError {
	if te, ok := err.(*toolError); ok {
		return te
	}
	return fromRPC(err)
}

// maxAskValue bounds one argument's text in an approval message, and
// maxAskMessage the whole message.
const (
	maxAskValue   = 1024
	maxAskMessage = 16 << 10
)

// contentArgs carry bytes to write or feed: the message shows their size,
// not their text.
var contentArgs = []string{"content", "insert", "stdin"}

// askMessage shows the person what the call would do: the tool and each
// argument, paths decoded, content as its size, edits as their sizes, a
// command's argv in full.
func askMessage(name string, t *tool, raw json.RawMessage, judged []*fsmcpv1.JudgedPath, diff string) string {
	var args map[string]json.RawMessage
	json.Unmarshal(raw, &args)
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "Allow %s?", name)
	if t.description != "" {
		first, _, _ := strings.Cut(t.title+": "+t.description, ". ")
		fmt.Fprintf(&b, " (%s)", strings.TrimSuffix(first, "."))
	}
	b.WriteString("\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s: %s", strings.TrimSuffix(k, "_base64"), askValue(k, args[k], args["encoding"]))
	}
	// Where the paths lead now, as --rules judged them (the call is
	// refused if they lead elsewhere when it runs).
	for _, j := range judged {
		real := j.GetPath()
		if len(real) == 0 {
			real = []byte(".")
		}
		fmt.Fprintf(&b, "\nresolves: %s → %s", clipQuoted(j.GetName()), clipQuoted(real))
	}
	if diff != "" {
		b.WriteString("\n\nThe change:\n" + diff)
	}
	msg := b.String()
	if len(msg) > maxAskMessage {
		msg = string(trimPartialRune([]byte(msg[:maxAskMessage]))) + "\n…(cut)"
	}
	return msg
}

func askValue(k string, v, encoding json.RawMessage) string {
	var s string
	isString := json.Unmarshal(v, &s) == nil
	switch {
	case isString && strings.HasSuffix(k, "_base64"):
		p, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "(not valid base64)"
		}
		return clipQuoted(p)
	case isString && slices.Contains(contentArgs, k):
		n := len(s)
		var enc string
		if json.Unmarshal(encoding, &enc) == nil && enc == "base64" {
			n = base64.StdEncoding.DecodedLen(len(s))
		}
		return fmt.Sprintf("%d bytes", n)
	case isString:
		return clipQuoted([]byte(s))
	case k == "edits":
		var edits []struct {
			Old string `json:"old"`
			New string `json:"new"`
			All bool   `json:"all"`
		}
		if json.Unmarshal(v, &edits) != nil {
			break
		}
		parts := make([]string, len(edits))
		for i, e := range edits {
			all := ""
			if e.All {
				all = ", every occurrence"
			}
			parts[i] = fmt.Sprintf("%d bytes → %d bytes%s", len(e.Old), len(e.New), all)
		}
		return fmt.Sprintf("%d (%s)", len(edits), strings.Join(parts, "; "))
	case k == "argv":
		var argv []string
		if json.Unmarshal(v, &argv) != nil {
			break
		}
		parts := make([]string, len(argv))
		for i, a := range argv {
			parts[i] = clipQuoted([]byte(a))
		}
		return strings.Join(parts, " ")
	}
	if len(v) > maxAskValue {
		return string(v[:maxAskValue]) + "…"
	}
	return string(v)
}

// clipQuoted quotes p as a Go string literal (so control characters and
// bytes that are not UTF-8 show as escapes), cut at maxAskValue.
func clipQuoted(p []byte) string {
	cut := len(p) > maxAskValue
	if cut {
		p = p[:maxAskValue]
	}
	q := fmt.Sprintf("%q", p)
	if cut {
		q += "…"
	}
	return q
}

// callNote is what a call adds to its audit line beyond the call itself:
// the approval decision, the undo token its reply carries, and the token
// an fs_undo call spent.
type callNote struct {
	decision string
	undo     string
	undone   string
}

type callNoteKey struct{}

// withNote gives ctx a note for the call's audit line.
func withNote(ctx context.Context) (context.Context, *callNote) {
	n := &callNote{}
	return context.WithValue(ctx, callNoteKey{}, n), n
}

func noteDecision(ctx context.Context, d string) {
	if n, ok := ctx.Value(callNoteKey{}).(*callNote); ok {
		n.decision = d
	}
}
