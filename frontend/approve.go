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
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
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
// nonce (16), the digest of the effect the person was shown (32), MAC
// (32).
const (
	stateHead = 8 + 16 + 32
	stateLen  = stateHead + 32
)

// seal returns a fresh state for this call, whose question showed the
// effect digested as shown.
func (a *approvals) seal(binding, shown [32]byte, now time.Time) string {
	var b [stateLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.Add(askLifetime).UnixNano()))
	rand.Read(b[8:24])
	copy(b[24:stateHead], shown[:])
	copy(b[stateHead:], a.mac(b[:stateHead], binding))
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
// accepted once, before it expires, for the call it was made for. It
// returns the digest of the effect the question showed.
func (a *approvals) open(state string, binding [32]byte, now time.Time) (shown [32]byte, err error) {
	b, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil || len(b) != stateLen || !hmac.Equal(b[stateHead:], a.mac(b[:stateHead], binding)) {
		return shown, errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
			"the approval's requestState was not issued for this call (tool, arguments, session and where the paths lead must be those asked about)")
	}
	expires := time.Unix(0, int64(binary.BigEndian.Uint64(b[:8])))
	if now.After(expires) {
		return shown, errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, "the approval expired; call the tool again to be asked anew")
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
		return shown, errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, "the approval was already used; call the tool again to be asked anew")
	}
	a.used[nonce] = expires
	copy(shown[:], b[24:stateHead])
	return shown, nil
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
	// Accepted, but what the call would change is no longer what the
	// question showed.
	decisionChanged = "changed_since_asked"
	// By a --rules line.
	decisionDeniedByRule  = "denied_by_rule"
	decisionAllowedByRule = "allowed_by_rule"
)

// approve runs before a call of t that needs the person. It returns the
// request to run when the call may run (req, or req with the
// precondition the approval binds it to), else the result to answer
// with: the input request that asks, or a refusal. judged are the real
// paths --rules resolved the call's paths to: the question shows them and
// the approval is bound to them.
func (s *server) approve(ctx context.Context, t *tool, req *mcp.CallToolRequest, judged []*fsmcpv1.JudgedPath) (*mcp.CallToolRequest, *mcp.CallToolResult) {
	// Arguments that fail validation are refused before anyone is asked.
	if _, err := t.decode(ctx, req); err != nil {
		return nil, errorResult(asToolError(err))
	}
	a := s.approvals
	if a.sessionAllows(req.Session, t.name) {
		noteDecision(ctx, decisionAllowed)
		return req, nil
	}
	binding, err := callBinding(req, t.name, judged)
	if err != nil {
		return nil, errorResult(asToolError(err))
	}
	now := time.Now()
	name := s.cfg.ToolsPrefix + t.name
	if state := req.Params.RequestState; state != "" {
		shown, err := a.open(state, binding, now)
		if err != nil {
			noteDecision(ctx, decisionBadApproval)
			return nil, errorResult(asToolError(err))
		}
		answer, _ := req.Params.InputResponses[askInputID].(*mcp.ElicitResult)
		switch {
		case answer == nil:
			noteDecision(ctx, decisionBadApproval)
			return nil, errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
				"the retried call carries no answer to the approval request %q", askInputID))
		case answer.Action == "accept":
			// The person approved the effect they were shown, and
			// only that one.
			e, err := s.effectOf(ctx, t, req)
			if err != nil {
				noteDecision(ctx, decisionChanged)
				return nil, errorResult(asToolError(err))
			}
			if e.digest() != shown {
				noteDecision(ctx, decisionChanged)
				return nil, errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED,
					"what this %s call would change is no longer what the person approved (a file changed since the question); "+
						"nothing was changed: call again to be asked anew", name))
			}
			run, err := e.withGuard(req)
			if err != nil {
				return nil, errorResult(asToolError(err))
			}
			if remember, _ := answer.Content["remember"].(bool); remember {
				a.allowForSession(req.Session, t.name)
			}
			noteDecision(ctx, decisionAccepted)
			return run, nil
		case answer.Action == "decline":
			noteDecision(ctx, decisionDeclined)
			return nil, errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
				"the person declined this %s call; nothing was changed", name))
		default:
			noteDecision(ctx, decisionCancelled)
			return nil, errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
				"the person dismissed the approval of this %s call without allowing it; nothing was changed", name))
		}
	}
	if !canElicitForm(req.ClientCapabilities()) {
		noteDecision(ctx, decisionNoElicit)
		return nil, errorResult(errf(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
			"%s needs the person's approval (--ask), and this client did not declare the elicitation capability (form mode) to ask it",
			name))
	}
	// The question shows the effect, which also refuses, unasked, a call
	// that could not succeed.
	e, err := s.effectOf(ctx, t, req)
	if err != nil {
		return nil, errorResult(asToolError(err))
	}
	noteDecision(ctx, decisionAsked)
	return nil, &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{askInputID: &mcp.ElicitParams{
			Mode:    "form",
			Message: askMessage(name, t, req.Params.Arguments, judged, e),
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
		RequestState: a.seal(binding, e.digest(), now),
	}
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

// The bounds of an approval question. A name is never cut; other
// argument values, each file's diff, all the diffs together and a
// command's stdin are, and the question counts what it leaves out. Every
// file gets an equal share of maxAskDiffs (at least minAskDiff, at most
// maxAskDiff), so that many large diffs cannot push the last file's out
// of sight.
const (
	maxAskValue = 1024
	maxAskDiff  = 4 << 10
	minAskDiff  = 512
	maxAskDiffs = 24 << 10
	maxAskStdin = 2 << 10
)

// contentArgs carry bytes to write or feed: the message shows their size
// (and a command's stdin itself, bounded, with its sha256), not their text.
var contentArgs = []string{"content", "insert", "stdin", "patch"}

// askMessage shows the person what the call would do: the tool and each
// argument, paths decoded and never cut, content as its size, edits as
// their sizes, a command's argv and stdin; then every file the call would
// change with its diff. Everything the call's arguments or the files put
// in it is escaped (escapeText): control characters, bidi controls and
// zero-width characters cannot hide or reorder what it shows.
func askMessage(name string, t *tool, raw json.RawMessage, judged []*fsmcpv1.JudgedPath, e *effect) string {
	var args map[string]json.RawMessage
	json.Unmarshal(raw, &args)
	keys := slices.Sorted(maps.Keys(args))
	var b strings.Builder
	fmt.Fprintf(&b, "Allow %s?", name)
	if t.description != "" {
		first, _, _ := strings.Cut(t.title+": "+t.description, ". ")
		fmt.Fprintf(&b, " (%s)", strings.TrimSuffix(first, "."))
	}
	b.WriteString("\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s: %s", strings.TrimSuffix(k, "_base64"), askValue(t, k, args[k], args))
	}
	// Where the paths lead now, as --rules judged them (the call is
	// refused if they lead elsewhere when it runs).
	for _, j := range judged {
		real := j.GetPath()
		if len(real) == 0 {
			real = []byte(".")
		}
		fmt.Fprintf(&b, "\nresolves: %s → %s", quoteName(j.GetName()), quoteName(real))
	}
	if e != nil && len(e.files) > 0 {
		writeEffect(&b, e)
	}
	return b.String()
}

// writeEffect names every file of e, then shows each diff within the
// bounds, counting what it leaves out.
func writeEffect(b *strings.Builder, e *effect) {
	verb := "changes"
	if e.files[0].diff == nil && !e.files[0].binary {
		verb = "acts on"
	}
	fmt.Fprintf(b, "\n\nThis call %s %d path(s):", verb, len(e.files))
	for _, f := range e.files {
		fmt.Fprintf(b, "\n  %s: %s", quoteName(f.name), f.what)
		if f.sha256 != "" {
			fmt.Fprintf(b, " (sha256 %s)", f.sha256)
		}
	}
	if e.guard != "" {
		fmt.Fprintf(b, "\nIt runs only while %s is still %s.", e.guard, e.guardValue)
	}
	left := maxAskDiffs
	for i, f := range e.files {
		if f.diff == nil && !f.binary {
			continue
		}
		fmt.Fprintf(b, "\n\n--- the change to %s", quoteName(f.name))
		if f.binary {
			fmt.Fprintf(b, "\n(the content is not text: %d bytes of binary diff not shown)", len(f.diff))
			continue
		}
		share := min(maxAskDiff, max(minAskDiff, left/(len(e.files)-i)))
		shown := cutLines(f.diff, share)
		left -= shown
		b.WriteString("\n")
		b.WriteString(strings.TrimSuffix(escapeText(f.diff[:shown], true), "\n"))
		if rest := f.diff[shown:]; len(rest) > 0 {
			fmt.Fprintf(b, "\n…(%d more lines, %d bytes, of this diff not shown)", lineCount(rest), len(rest))
		}
		if f.cut {
			b.WriteString("\n…(and the rest of this diff did not fit the dry run's reply)")
		}
	}
}

// cutLines returns how much of diff to show within budget bytes: whole
// lines while they fit, else budget bytes at a character boundary.
func cutLines(diff []byte, budget int) int {
	if len(diff) <= budget {
		return len(diff)
	}
	if i := bytes.LastIndexByte(diff[:budget], '\n'); i >= 0 {
		return i + 1
	}
	return len(trimPartialRune(diff[:budget]))
}

// lineCount counts the lines of p, a last one without a newline
// included.
func lineCount(p []byte) int {
	n := bytes.Count(p, []byte("\n"))
	if len(p) > 0 && p[len(p)-1] != '\n' {
		n++
	}
	return n
}

func askValue(t *tool, k string, v json.RawMessage, args map[string]json.RawMessage) string {
	var s string
	isString := json.Unmarshal(v, &s) == nil
	base := strings.TrimSuffix(k, "_base64")
	var decl *pathDecl
	for i := range t.pathArgs {
		if t.pathArgs[i].name == base {
			decl = &t.pathArgs[i]
		}
	}
	isPath := decl != nil && decl.kind == kindOne
	if decl != nil && (decl.kind == kindList || decl.kind == kindUnder) && k == base {
		// Every name of a list, whole.
		var items any
		json.Unmarshal(v, &items)
		var names []string
		decl.each(map[string]any{k: items}, func(p []byte) { names = append(names, quoteName(p)) })
		return strings.Join(names, ", ")
	}
	switch {
	case isString && strings.HasSuffix(k, "_base64"):
		p, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "(not valid base64)"
		}
		if isPath {
			return quoteName(p)
		}
		return clipQuoted(p)
	case isString && isPath:
		return quoteName([]byte(s))
	case isString && k == "stdin":
		return stdinValue(s, args["stdin_encoding"])
	case isString && slices.Contains(contentArgs, k):
		n := len(s)
		var enc string
		if json.Unmarshal(args["encoding"], &enc) == nil && enc == "base64" {
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
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) == nil {
		// A path-keyed object (fs_patch's if_sha256): its files are
		// named, each with its sha256, below.
		return fmt.Sprintf("%d entries", len(m))
	}
	if len(v) > maxAskValue {
		return escapeText(trimPartialRune(v[:maxAskValue]), false) + "…"
	}
	return escapeText(v, false)
}

// stdinValue shows a command's stdin: its size and sha256, and its first
// maxAskStdin bytes, escaped, line breaks kept.
func stdinValue(s string, encoding json.RawMessage) string {
	data := []byte(s)
	var enc string
	if json.Unmarshal(encoding, &enc) == nil && enc == "base64" {
		d, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "(not valid base64)"
		}
		data = d
	}
	sum := sha256.Sum256(data)
	out := fmt.Sprintf("%d bytes, sha256 %x", len(data), sum)
	shown := cutLines(data, maxAskStdin)
	if len(data) > 0 {
		out += ":\n" + escapeText(data[:shown], true)
	}
	if rest := data[shown:]; len(rest) > 0 {
		out += fmt.Sprintf("\n…(%d more bytes of stdin not shown)", len(rest))
	}
	return out
}

// quoteName quotes a name as a Go string literal, whole: control
// characters, bytes that are not UTF-8 and every character that is not
// printable (bidi controls and zero-width characters among them) show as
// escapes.
func quoteName(p []byte) string { return strconv.Quote(string(p)) }

// clipQuoted quotes p as quoteName does, cut at maxAskValue.
func clipQuoted(p []byte) string {
	if len(p) <= maxAskValue {
		return quoteName(p)
	}
	return quoteName(p[:maxAskValue]) + "…"
}

// escapeText renders p for the person: printable characters as they are,
// every other one as a visible escape (\x1b, \r, \u202e, \u200b; a byte
// that is not UTF-8 as \xff). With lines, line feeds and tabs stay, so a
// diff or a script reads as one. Bidi controls (U+202A–202E, U+2066–2069,
// U+200E/F, U+061C) and zero-width characters (U+200B–200D, U+2060,
// U+FEFF) are format characters, which unicode.IsPrint refuses;
// TestEscapeText holds that for each.
func escapeText(p []byte, lines bool) string {
	var b strings.Builder
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, p[0])
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == ' ' || unicode.IsPrint(r):
			b.Write(p[:n])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		p = p[n:]
	}
	return b.String()
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
