package sandbox

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Policy is the operator's protected and denied paths. The front-end
// parses it from its flags and hands it to the worker in its trusted argv,
// never over an RPC.
//
// For the file tools it is not kernel-backed: Landlock grants rights to
// whole hierarchies and cannot carve a read-only or unreadable path out of
// a writable root without splitting the root's rule per entry, so the
// policy is enforced where the worker resolves names (resolve.go).
// Commands, which resolve names themselves, get it in their Landlock rules
// split that way at each start (rootRules).
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

// args renders p as the --protect and --deny arguments every fsmcp
// subcommand takes.
func (p Policy) args() []string {
	var a []string
	for _, g := range p.Protect {
		a = append(a, "--protect="+g)
	}
	for _, g := range p.Deny {
		a = append(a, "--deny="+g)
	}
	return a
}

// DefaultProtect is the protected set unless --no-default-protect: the
// files through which git, hg, direnv, editors, coding agents and their
// dev containers run commands on the host (docs/design/policy.md gives
// each one's reason). Each matches at any depth, so a nested repository
// is covered. The last, ".git", covers the rest of the git directory and
// a ".git" file: a linked worktree's or submodule's ".git" file names the
// git directory, and ".git/commondir", ".git/modules/*/config" and
// ".git/worktrees/*" lead git to configuration that the first globs do
// not name.
var DefaultProtect = []string{
	".git/hooks/**", ".git/config", ".git/info/**", ".gitmodules",
	".gitattributes", ".envrc", ".vscode/**", ".idea/**",
	".hg/hgrc", ".husky/**", ".mcp.json", ".claude/**", ".cursor/**",
	".codex/**", ".gemini/**", ".windsurf/**", ".continue/**",
	".devcontainer/**", "*.code-workspace", ".git",
}

// globRule is one operator glob, compiled.
type globRule struct {
	glob    string // as the operator gave it, for messages
	pattern string // for doublestar.Match
	// lit, for a glob without metacharacters (every default), is its
	// components: it then matches where they occur in a row, at the
	// start (anchored) or at any depth. A trailing "**" is dropped: a
	// rule covers what lies beneath whatever it matches anyway.
	lit      []string
	anchored bool
}

// Matcher is a compiled Policy. A path matches a rule when the path or one
// of its ancestors matches the rule's glob: "secrets" covers everything
// beneath the directory, as ".git/hooks/**" covers the directory itself.
type Matcher struct {
	protect, deny []globRule
	// foldProtect and foldDeny are the same globs, case-folded (Fold),
	// for paths in directories that compare names without case.
	foldProtect, foldDeny []globRule
	// lines are the --rules lines of one tool (WithLines).
	lines []RuleLine
	// paths are protected literally (WithPaths): each path and what lies
	// beneath it; "" is the whole root.
	paths []string
}

// RuleLine is one line of the operator's --rules file as it judges
// content for the tool it names: after --deny, the first line whose glob
// matches a path decides, and a deny line denies the path's content
// exactly as --deny does (every tool, search and command); an allow or
// ask line leaves it to --deny.
type RuleLine struct {
	Deny bool
	Glob Glob
	// Label names the line in refusals ("--rules line 3 (deny * .env)").
	Label string
}

// WithLines returns r judging content also by lines, in their order.
func (r *Matcher) WithLines(lines []RuleLine) *Matcher {
	c := *r
	c.lines = lines
	return &c
}

// WithPaths returns r protecting also the root-relative paths, each
// literally (a path's bytes are never read as a glob): the path and what
// lies beneath it, "" the whole root.
func (r *Matcher) WithPaths(paths []string) *Matcher {
	c := *r
	c.paths = paths
	return &c
}

// Arg renders l as the --rule argument a command's shim takes
// (ParseRuleLine); the label is not carried.
func (l RuleLine) Arg() string {
	if l.Deny {
		return "--rule=deny " + l.Glob.r.glob
	}
	return "--rule=pass " + l.Glob.r.glob
}

// ParseRuleLine parses the value of a --rule argument (Arg).
func ParseRuleLine(v string) (RuleLine, error) {
	action, glob, _ := strings.Cut(v, " ")
	if action != "deny" && action != "pass" {
		return RuleLine{}, fmt.Errorf("--rule %q: want deny or pass, then a glob", v)
	}
	g, err := CompileGlob(glob)
	if err != nil {
		return RuleLine{}, fmt.Errorf("--rule %q: %w", v, err)
	}
	return RuleLine{Deny: action == "deny", Glob: g, Label: "--rules " + v}, nil
}

// Compile checks and compiles the operator's globs. A glob matches
// the root-relative path as bytes: no case folding, no Unicode
// normalisation (ProtectedFolded and DeniedFolded are for directories that
// fold case). "*" and "?" do not cross "/", "**" spans any number of
// components (zero included), "[...]" and "{a,b}" are doublestar's
// (https://github.com/bmatcuk/doublestar). A glob that starts with "/" is
// anchored at the root; any other matches at any depth.
func (p Policy) Compile() (*Matcher, error) {
	var c Matcher
	for _, set := range []struct {
		flag       string
		globs      []string
		into, fold *[]globRule
	}{{"--protect", p.Protect, &c.protect, &c.foldProtect}, {"--deny", p.Deny, &c.deny, &c.foldDeny}} {
		for _, g := range set.globs {
			r, err := compileGlob(g)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", set.flag, g, err)
			}
			*set.into = append(*set.into, r)
			f, err := compileGlob(Fold(g))
			if err != nil {
				return nil, fmt.Errorf("%s %q, case-folded: %w", set.flag, g, err)
			}
			f.glob = g
			*set.fold = append(*set.fold, f)
		}
	}
	return &c, nil
}

// Fold is the form in which a directory that folds case compares names:
// Unicode full case folding between canonical decompositions, as ext4's
// and f2fs's casefold ("utf8 nfdicf") do. ".GIT/CONFIG" folds to
// ".git/config", the Kelvin sign to "k". vfat, exfat, ntfs3 and cifs fold
// by upcase tables that this covers for the names a policy holds. A
// string that is not valid UTF-8 is returned as it is: casefold compares
// such names byte for byte.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	switch {
	case ascii:
		return strings.ToLower(s)
	case !utf8.ValidString(s):
		return s
	}
	return norm.NFD.String(cases.Fold().String(norm.NFD.String(s)))
}

func compileGlob(g string) (globRule, error) {
	switch {
	case g == "" || g == "/":
		return globRule{}, fmt.Errorf("empty glob")
	case strings.IndexByte(g, 0) >= 0:
		return globRule{}, fmt.Errorf("the glob contains a NUL byte")
	case !utf8.ValidString(g):
		// The paths it matches may be any bytes; the glob itself is
		// reported in the attestation, as text.
		return globRule{}, fmt.Errorf("the glob is not valid UTF-8")
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
	r := globRule{glob: g, pattern: pat}
	rest, anyDepth := strings.CutPrefix(pat, "**/")
	rest = strings.TrimSuffix(rest, "/**")
	if rest != "**" && !strings.ContainsAny(rest, `*?[]{}\`) {
		r.lit, r.anchored = strings.Split(rest, "/"), !anyDepth
	}
	return r, nil
}

// Glob is one glob of the policy's syntax (Compile), compiled, for
// other judges of root-relative paths (the worker's --rules) to match
// exactly as --protect and --deny do.
type Glob struct{ r globRule }

// CompileGlob checks and compiles one glob, with Compile's refusals.
func CompileGlob(g string) (Glob, error) {
	r, err := compileGlob(g)
	return Glob{r}, err
}

// Match reports whether the root-relative path rel or one of its
// ancestors matches g. The root ("") matches nothing.
func (g *Glob) Match(rel string) bool { return rel != "" && g.r.matches(rel) }

// matchLit reports whether the components lit occur in a row in rel: at
// its start when anchored, else anywhere.
func matchLit(rel string, lit []string, anchored bool) bool {
	for start := 0; ; {
		if seqAt(rel, start, lit) {
			return true
		}
		i := strings.IndexByte(rel[start:], '/')
		if anchored || i < 0 {
			return false
		}
		start += i + 1
	}
}

// seqAt reports whether the components of rel from byte offset start
// (a component's first byte) begin with lit.
func seqAt(rel string, start int, lit []string) bool {
	pos := start
	for i, c := range lit {
		if !strings.HasPrefix(rel[pos:], c) {
			return false
		}
		pos += len(c)
		if pos == len(rel) {
			return i == len(lit)-1
		}
		if rel[pos] != '/' {
			return false
		}
		pos++
	}
	return true
}

// Protected returns the glob (or the literal path, WithPaths) that makes
// the root-relative path rel read-only, if any.
func (r *Matcher) Protected(rel string) (string, bool) {
	if g, ok := match(r.protect, rel); ok {
		return g, true
	}
	for _, p := range r.paths {
		if p == "" || rel == p || strings.HasPrefix(rel, p+"/") {
			return p, true
		}
	}
	return "", false
}

// AbovePath reports whether a path protected literally (WithPaths) lies
// strictly beneath the root-relative directory rel, whether or not it
// exists.
func (r *Matcher) AbovePath(rel string) bool {
	for _, p := range r.paths {
		if p != "" && (rel == "" || strings.HasPrefix(p, rel+"/")) {
			return true
		}
	}
	return false
}

// Denied returns what denies the content of rel, if anything: "--deny"
// and the glob, or the label of the --rules line.
func (r *Matcher) Denied(rel string) (string, bool) {
	if g, ok := match(r.deny, rel); ok {
		return "--deny " + g, true
	}
	if rel == "" {
		return "", false
	}
	for _, l := range r.lines {
		if l.Glob.r.matches(rel) {
			if !l.Deny {
				return "", false
			}
			return l.Label, true
		}
	}
	return "", false
}

// ProtectedFolded is Protected with rel and the globs case-folded
// (Fold): the glob that makes rel read-only where the directories on its
// way compare names without case.
func (r *Matcher) ProtectedFolded(rel string) (string, bool) {
	if len(r.foldProtect) == 0 {
		return "", false
	}
	return match(r.foldProtect, Fold(rel))
}

// DeniedFolded is Denied with rel and the --deny globs case-folded
// ("--deny" and the glob); --rules lines are matched as bytes only.
func (r *Matcher) DeniedFolded(rel string) (string, bool) {
	if len(r.foldDeny) == 0 {
		return "", false
	}
	if g, ok := match(r.foldDeny, Fold(rel)); ok {
		return "--deny " + g, true
	}
	return "", false
}

// Empty reports whether r protects and denies nothing.
func (r *Matcher) Empty() bool { return !r.Protects() && !r.Denies() }

// Protects reports whether r protects anything.
func (r *Matcher) Protects() bool { return len(r.protect) > 0 || len(r.paths) > 0 }

// Denies reports whether r denies anything.
func (r *Matcher) Denies() bool {
	return len(r.deny) > 0 || slices.ContainsFunc(r.lines, func(l RuleLine) bool { return l.Deny })
}

// match reports the first rule, in the order given, that matches rel or
// one of its ancestors. The root ("") matches nothing.
func match(rules []globRule, rel string) (string, bool) {
	if rel == "" {
		return "", false
	}
	for i := range rules {
		if r := &rules[i]; r.matches(rel) {
			return r.glob, true
		}
	}
	return "", false
}

// matches reports whether r matches rel or one of its ancestors.
func (r *globRule) matches(rel string) bool {
	if r.lit != nil {
		return matchLit(rel, r.lit, r.anchored)
	}
	return r.matchPattern(rel)
}

// matchPattern is matches by doublestar, one ancestor at a time.
func (r *globRule) matchPattern(rel string) bool {
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		// The pattern was validated: Match cannot fail.
		if ok, _ := doublestar.Match(r.pattern, rel[:i]); ok {
			return true
		}
	}
	return false
}

// RGExcludes are the deny rules as rg --glob=! exclusions for a search
// run in the directory whose root-relative path is dir, to be passed
// after every other glob (in rg the last matching glob wins). A rule that
// matches at any depth is passed as it is; one anchored at the root, only
// when dir is a literal prefix of it (else rg cannot express it). They
// only spare rg the reading: the worker filters rg's results by Denied
// as well, so what rg's glob dialect expresses differently is caught.
// The --rules deny lines before the first line of another action are
// passed too; a later one is left to Denied, since the earlier line may
// let through part of what it matches.
func (r *Matcher) RGExcludes(dir string) []string {
	globs := slices.Clip(r.deny)
	for _, l := range r.lines {
		if !l.Deny {
			break
		}
		globs = append(globs, l.Glob.r)
	}
	var out []string
	for _, d := range globs {
		rest, anyDepth := strings.CutPrefix(d.pattern, "**/")
		switch {
		case anyDepth:
			out = append(out, "--glob=!**/"+rest)
		case dir == "":
			out = append(out, "--glob=!/"+d.pattern)
		case !strings.ContainsAny(dir, `*?[]{}\`) && strings.HasPrefix(d.pattern, dir+"/"):
			out = append(out, "--glob=!/"+d.pattern[len(dir)+1:])
		}
	}
	return out
}
