package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// --rules FILE: the worker reads the rules (worker/rulesfile) and judges
// a call's paths by them (worker/check.go), because it alone can read the
// file once confined and it alone knows the real path a call's path
// resolves to. The front-end asks it before each call and acts on the
// answer (permit): deny refuses, ask puts the call before the person as
// --ask does, allow runs it without asking even where --ask would. Calls
// no rule matches are what the other flags make them.

// checkRules resolves --rules to the real file and refuses one the agent
// could write (inside the root) or that is not a regular file. Its syntax
// is the worker's to check, at its start.
func (c *Config) checkRules() error {
	if c.Rules == "" {
		return nil
	}
	p, err := filepath.EvalSymlinks(c.Rules)
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		return fmt.Errorf("--rules %s: %w", c.Rules, errors.Unwrap(err))
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("--rules %s: %w", c.Rules, errors.Unwrap(err))
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--rules %s: not a regular file", c.Rules)
	}
	root, err := realDir("--root", c.Root)
	if err != nil {
		return err
	}
	if within(p, root) {
		return fmt.Errorf("--rules %s: must lie outside --root, where the agent cannot change it", c.Rules)
	}
	c.Rules = p
	return nil
}

// permit decides, after the call was admitted (callGate) and before it
// runs, whether it may: the rules first, then --ask. It returns the request to run (req, or req bound to what the
// person approved), else the result to answer with.
// With --rules it also returns the metadata the call's worker RPCs carry:
// the tool, and every real path Check judged with its decision, which the
// worker requires the call's own resolution to find again. An approval is
// bound to those paths as well as to the arguments: the person is asked
// about where the call leads, and a call that leads elsewhere by the time
// it runs is refused.
func (s *server) permit(ctx context.Context, t *tool, req *mcp.CallToolRequest) (*mcp.CallToolRequest, metadata.MD, *mcp.CallToolResult) {
	ask := s.approvals.needed(t.name)
	var md metadata.MD
	var judged []*fsmcpv1.JudgedPath
	if s.cfg.Rules != "" {
		if _, err := t.decode(ctx, req); err != nil {
			return nil, nil, errorResult(asToolError(err))
		}
		var args map[string]any
		json.Unmarshal(req.Params.Arguments, &args) // validated by decode
		paths := t.judgedPaths(args)
		resp, err := s.wc.Check(ctx, &fsmcpv1.CheckRequest{Tool: t.name, Paths: paths})
		if err != nil {
			return nil, nil, errorResult(s.callError(ctx, err))
		}
		md = metadata.Pairs(link.ToolMetadata, t.name)
		if len(paths) > 0 {
			judged = resp.GetJudged()
			b, err := proto.Marshal(&fsmcpv1.JudgedPaths{Paths: judged})
			if err != nil {
				return nil, nil, errorResult(asToolError(bug(err)))
			}
			md.Append(link.JudgedMetadata, string(b))
		}
		ctx = metadata.NewOutgoingContext(ctx, md)
		switch resp.GetAction() {
		case fsmcpv1.RuleAction_RULE_ACTION_DENY:
			noteDecision(ctx, decisionDeniedByRule)
			return nil, nil, errorResult(&toolError{code: fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
				message: fmt.Sprintf("%s: %q is denied by --rules line %d (%s)",
					s.cfg.ToolsPrefix+t.name, resp.GetPath(), resp.GetLine(), resp.GetRule()),
				path: resp.GetPath(), hasPath: true, policyViolation: true})
		case fsmcpv1.RuleAction_RULE_ACTION_ASK:
			ask = true
		case fsmcpv1.RuleAction_RULE_ACTION_ALLOW:
			noteDecision(ctx, decisionAllowedByRule)
			ask = false
		}
	}
	if !ask {
		return req, md, nil
	}
	run, res := s.approve(ctx, t, req, judged)
	return run, md, res
}
