package worker

import (
	"context"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// --rules at the call. The front-end asks Check before a call (to know
// whether to ask the person, and what to show), but Check and the call are
// two RPCs: a rename in between (the agent moving a symlinked directory,
// say) could make the call's path resolve somewhere Check never judged.
// So the call itself carries its tool and what Check judged (gRPC
// metadata, set by the front-end), and the resolver judges the rules
// again on every name the call resolves (judgeRules), where the policy is
// judged: a denied path is refused there, and a path that now resolves to
// a real path Check did not judge with the same decision (for an ask
// rule: not the path the person approved) is refused, nothing done.

// callRules is a call's rule context.
type callRules struct {
	tool string
	// rules are the rules in force when the call started: the whole
	// call judges by them.
	rules []rulesfile.Rule
	// policy is the operator's policy with rules' lines for tool: what
	// the call judges content by (policyOf).
	policy *sandbox.Matcher
	// judged maps each of the call's paths and the real path Check found
	// for it to its decision; nil when the call named no path.
	judged map[judgedKey]fsmcpv1.RuleAction
}

// judgedKey is a call's path (after clientPath) and a real path it
// resolved to.
type judgedKey struct{ name, rel string }

type callRulesKey struct{}

// callRulesFrom reads the call's rule context from its metadata, with
// the rules in force now. A call that names no tool cannot be judged and
// is refused.
func (s *Service) callRulesFrom(ctx context.Context, method string) (*callRules, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	tools := md.Get(link.ToolMetadata)
	if len(tools) != 1 || tools[0] == "" {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "%s: with --rules every call names its tool", method)
	}
	cr := s.newCallRules(tools[0])
	if vals := md.Get(link.JudgedMetadata); len(vals) > 0 {
		var jp fsmcpv1.JudgedPaths
		if len(vals) != 1 || proto.Unmarshal([]byte(vals[0]), &jp) != nil {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "%s: the judged paths do not decode", method)
		}
		cr.judged = map[judgedKey]fsmcpv1.RuleAction{}
		for _, p := range jp.GetPaths() {
			cr.judged[judgedKey{string(p.GetName()), string(p.GetPath())}] = p.GetAction()
		}
	}
	return cr, nil
}

// newCallRules is the rule context of a call of tool, with the rules in
// force now.
func (s *Service) newCallRules(tool string) *callRules {
	rules := s.rules.Current()
	return &callRules{tool: tool, rules: rules, policy: s.policy.WithLines(rulesfile.LinesFor(rules, tool))}
}

// unjudged are the methods that resolve no client path under the rules.
// The Calls stream is transport: each call on it runs through
// rulesUnary itself, with its own metadata.
var unjudged = map[string]bool{
	fsmcpv1.WorkerService_Hello_FullMethodName: true,
	fsmcpv1.WorkerService_Check_FullMethodName: true,
	fsmcpv1.WorkerService_Calls_FullMethodName: true,
}

// rulesUnary gives each call its rule context (with --rules).
func (s *Service) rulesUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if s.rules == nil || unjudged[info.FullMethod] {
		return h(ctx, req)
	}
	cr, err := s.callRulesFrom(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(context.WithValue(ctx, callRulesKey{}, cr), req)
}

// rulesStream is rulesUnary for streaming calls.
func (s *Service) rulesStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if s.rules == nil || unjudged[info.FullMethod] {
		return h(srv, ss)
	}
	cr, err := s.callRulesFrom(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &rulesStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callRulesKey{}, cr)})
}

type rulesStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (r *rulesStream) Context() context.Context { return r.ctx }

// judgeRules judges --rules at the call: rel is the real root-relative
// path the call's path p resolved to (op names the step, for the error).
// A denied path is refused. A path Check judged must have the same
// decision now; one it did not judge was reached through a rename since
// (or named no path for Check: then an ask rule cannot have been put to
// the person, and is refused).
func (s *Service) judgeRules(ctx context.Context, op, p, rel string) error {
	if s.rules == nil {
		return nil
	}
	return s.judgeCallRules(callRulesOf(ctx), op, p, rel)
}

// callRulesOf is the rule context rulesUnary or rulesStream gave the call.
func callRulesOf(ctx context.Context) *callRules {
	cr, _ := ctx.Value(callRulesKey{}).(*callRules)
	return cr
}

// policyOf is the policy the call judges content by: --deny, and under
// --rules the lines of the call's tool as they were when it started. So
// a deny line hides content from its tool wherever --deny does: the
// resolver's judge, copies and moves (judgeCarry), search results and
// rg's exclusions (openSearch), hashes and hard links (links.go).
func (s *Service) policyOf(ctx context.Context) *sandbox.Matcher {
	if cr := callRulesOf(ctx); cr != nil {
		return cr.policy
	}
	return s.policy
}

func (s *Service) judgeCallRules(cr *callRules, op, p, rel string) error {
	if s.rules == nil {
		return nil
	}
	if cr == nil {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, p, "%s: resolved outside a call under --rules", op)
	}
	r, matched := rulesfile.First(cr.rules, cr.tool, rel)
	action := fsmcpv1.RuleAction_RULE_ACTION_UNSPECIFIED
	if matched {
		action = r.Action
	}
	if action == fsmcpv1.RuleAction_RULE_ACTION_DENY {
		e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, p,
			"%s: %q is denied by --rules line %d (%s), judged where the path leads as the call runs; nothing was done", cr.tool, rel, r.Line, r.Text)
		e.PolicyViolation = true
		return e
	}
	if cr.judged == nil {
		if action == fsmcpv1.RuleAction_RULE_ACTION_ASK {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, p,
				"%s: %q falls under --rules line %d (%s), but the call names no path the person could be asked about; nothing was done", cr.tool, rel, r.Line, r.Text)
		}
		return nil
	}
	if was, ok := cr.judged[judgedKey{p, rel}]; !ok || was != action {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p,
			"%s: the path now resolves to %q, not to what --rules judged before the call: something was renamed meanwhile, or the rules changed; nothing was done",
			op, rel)
	}
	return nil
}
