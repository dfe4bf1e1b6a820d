package worker

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// Policy is the operator's protected and denied paths. It comes from the
// worker's trusted argv, never from an RPC.
//
// It is not kernel-backed: Landlock grants rights to whole hierarchies and
// cannot carve a read-only or unreadable path out of a writable root, so
// the policy is enforced where the worker resolves names (resolve.go).
// It does not protect files that a host tool runs but no static list
// knows (a Makefile, package.json scripts, a test suite), nor a protected
// file reached under a second name the kernel cannot tell apart (a hard
// link, a bind mount).
type Policy struct {
	// Protect globs name read-only paths: no tool may create, replace,
	// edit, remove or move them, or a directory holding them.
	Protect []string
	// Deny globs name paths whose content no tool may read or hash;
	// their names are still listed.
	Deny []string
}

// DefaultProtect is the protected set unless --no-default-protect: the
// files through which git, direnv and editors run commands on the host.
// Each matches at any depth, so a nested repository is covered. The last,
// ".git", covers the rest of the git directory and a ".git" file: a
// linked worktree's or submodule's ".git" file names the git directory,
// and ".git/commondir", ".git/modules/*/config" and ".git/worktrees/*"
// lead git to configuration that the first globs do not name.
var DefaultProtect = []string{
	".git/hooks/**", ".git/config", ".git/info/**", ".gitmodules",
	".gitattributes", ".envrc", ".vscode/**", ".idea/**", ".git",
}

// globRule is one operator glob, compiled.
type globRule struct {
	glob    string // as the operator gave it, for messages
	pattern string // for doublestar.Match
}

// policy is the compiled Policy. A path matches a rule when the path or
// one of its ancestors matches the rule's glob: "secrets" covers
// everything beneath the directory, as ".git/hooks/**" covers the
// directory itself.
type policy struct {
	protect, deny []globRule
}

// compilePolicy checks and compiles the operator's globs. A glob matches
// the root-relative path as bytes: no case folding, no Unicode
// normalisation. "*" and "?" do not cross "/", "**" spans any number of
// components (zero included), "[...]" and "{a,b}" are doublestar's
// (https://github.com/bmatcuk/doublestar). A glob that starts with "/" is
// anchored at the root; any other matches at any depth.
func compilePolicy(p Policy) (*policy, error) {
	var c policy
	for _, set := range []struct {
		flag  string
		globs []string
		into  *[]globRule
	}{{"--protect", p.Protect, &c.protect}, {"--deny", p.Deny, &c.deny}} {
		for _, g := range set.globs {
			r, err := compileGlob(g)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", set.flag, g, err)
			}
			*set.into = append(*set.into, r)
		}
	}
	return &c, nil
}

func compileGlob(g string) (globRule, error) {
	switch {
	case g == "" || g == "/":
		return globRule{}, fmt.Errorf("empty glob")
	case strings.IndexByte(g, 0) >= 0:
		return globRule{}, fmt.Errorf("the glob contains a NUL byte")
	case strings.HasSuffix(g, "/"):
		return globRule{}, fmt.Errorf("the glob ends in /: a glob naming a directory covers everything beneath it")
	case strings.HasPrefix(g, "//"):
		return globRule{}, fmt.Errorf("the glob starts with //")
	}
	pat := strings.TrimPrefix(g, "/")
	if pat == g {
		pat = "**/" + g
	}
	for _, c := range strings.Split(pat, "/") {
		if c == "" || c == "." || c == ".." {
			return globRule{}, fmt.Errorf("the glob has an empty, . or .. component, which no resolved path has")
		}
	}
	if !doublestar.ValidatePattern(pat) {
		return globRule{}, fmt.Errorf("not a valid glob")
	}
	return globRule{glob: g, pattern: pat}, nil
}

// protected returns the glob that makes the root-relative path rel
// read-only, if any.
func (p *policy) protected(rel string) (string, bool) { return match(p.protect, rel) }

// denied returns the glob that denies the content of rel, if any.
func (p *policy) denied(rel string) (string, bool) { return match(p.deny, rel) }

// match reports the first rule that matches rel or one of its ancestors.
// The root ("") matches nothing.
func match(rules []globRule, rel string) (string, bool) {
	if len(rules) == 0 || rel == "" {
		return "", false
	}
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		prefix := rel[:i]
		for _, r := range rules {
			// The pattern was validated: Match cannot fail.
			if ok, _ := doublestar.Match(r.pattern, prefix); ok {
				return r.glob, true
			}
		}
	}
	return "", false
}

// policyError is a refusal by the policy: permission_denied, naming the
// rule, marked as a policy violation.
func policyError(op, p, rel, what, flag, glob string) *Error {
	e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, p,
		"%s: %q %s by the policy (%s %s)", op, rel, what, flag, glob)
	e.PolicyViolation = true
	return e
}
