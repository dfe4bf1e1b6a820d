package sandbox

import (
	"slices"
	"strings"
	"testing"
)

func TestPolicyCompileRefuses(t *testing.T) {
	for _, g := range []string{"", "/", "a/", "//a", "a//b", "a/../b", "./a", "a/.", "[", "a{b", "a\x00b", "\xff"} {
		if _, err := (Policy{Protect: []string{g}}).Compile(); err == nil {
			t.Errorf("Compile(--protect %q) = nil, want an error", g)
		}
		if _, err := (Policy{Deny: []string{g}}).Compile(); err == nil {
			t.Errorf("Compile(--deny %q) = nil, want an error", g)
		}
	}
	if _, err := (Policy{Protect: DefaultProtect}).Compile(); err != nil {
		t.Fatalf("the defaults do not compile: %v", err)
	}
}

func TestPolicyMatch(t *testing.T) {
	r, err := Policy{Protect: append(slices.Clone(DefaultProtect), "/build/**", "*.sh", "/a/*/c", "/caf\u00e9"), Deny: []string{"secrets", "/top.key"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rel  string
		want string // "" for no match
	}{
		{".git/hooks/pre-commit", ".git/hooks/**"},
		{".git/hooks", ".git/hooks/**"},
		{"x/y/.git/hooks/a/b", ".git/hooks/**"},
		{".git/config", ".git/config"},
		{"sub/.git/config", ".git/config"},
		{".git/config.worktree", ".git"},
		{".git", ".git"},
		{"a/.git", ".git"},
		{".github/workflows/x", ""},
		{".gitx", ""},
		{"x.git/config", ""},
		{".git/info", ".git/info/**"},
		{".gitmodules", ".gitmodules"},
		{"d/.gitattributes", ".gitattributes"},
		{".envrc", ".envrc"},
		{".envrc.bak", ""},
		{".vscode", ".vscode/**"},
		{"p/.idea/x.xml", ".idea/**"},
		{".mcp.json", ".mcp.json"},
		{"a/b/.mcp.json", ".mcp.json"},
		{".mcp.json.bak", ""},
		{".claude/settings.json", ".claude/**"},
		{"p/.cursor/mcp.json", ".cursor/**"},
		{".codex", ".codex/**"},
		{".gemini/settings.json", ".gemini/**"},
		{".windsurf/rules/x.md", ".windsurf/**"},
		{".continue/config.yaml", ".continue/**"},
		{"w/.devcontainer/devcontainer.json", ".devcontainer/**"},
		{"proj.code-workspace", "*.code-workspace"},
		{"d/x.code-workspace", "*.code-workspace"},
		{"x.code-workspace.txt", ""},
		{".husky/pre-commit", ".husky/**"},
		{"web/.husky/_/h", ".husky/**"},
		{".hg/hgrc", ".hg/hgrc"},
		{"sub/.hg/hgrc", ".hg/hgrc"},
		{".hg/store/data", ""},
		{".IDEA/x.xml", ""}, // bytes: no case folding
		{".ENVRC", ""},
		{"build/x", "/build/**"},
		{"build", "/build/**"},
		{"src/build/x", ""},
		{"run.sh", "*.sh"},
		{"d/run.sh", "*.sh"},
		{"d/run.sh/inner", "*.sh"}, // an ancestor matches
		{"a/b/c", "/a/*/c"},
		{"a/b/c/d", "/a/*/c"},
		{"a/b/x/c", ""},
		{"", ""},
		{"e\u0301.sh", "*.sh"},
		{"caf\u00e9", "/caf\u00e9"},
		{"cafe\u0301", ""}, // no Unicode normalisation
		{"CAF\u00c9", ""},
		{"\xff\xfe.sh", "*.sh"},
	} {
		got, ok := r.Protected(c.rel)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Protected(%q) = %q, %v; want %q", c.rel, got, ok, c.want)
		}
	}
	for _, c := range []struct{ rel, want string }{
		{"secrets", "--deny secrets"}, {"secrets/a", "--deny secrets"}, {"x/secrets/a", "--deny secrets"}, {"secretsx", ""},
		{"top.key", "--deny /top.key"}, {"d/top.key", ""},
	} {
		got, ok := r.Denied(c.rel)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Denied(%q) = %q, %v; want %q", c.rel, got, ok, c.want)
		}
	}
}

func TestPolicyRGExcludes(t *testing.T) {
	r, err := Policy{Deny: []string{"secrets", "/top.key", "/a/b/*.pem", "/x[y]/z"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string][]string{
		"":     {"--glob=!**/secrets", "--glob=!/top.key", "--glob=!/a/b/*.pem", "--glob=!/x[y]/z"},
		"a":    {"--glob=!**/secrets", "--glob=!/b/*.pem"},
		"a/b":  {"--glob=!**/secrets", "--glob=!/*.pem"},
		"q":    {"--glob=!**/secrets"},
		"x[y]": {"--glob=!**/secrets"},
	} {
		if got := r.RGExcludes(dir); !slices.Equal(got, want) {
			t.Errorf("RGExcludes(%q) = %q, want %q", dir, got, want)
		}
	}
}

// FuzzPolicyLiteral: for a glob without metacharacters, the literal
// matcher agrees with doublestar on every path.
func FuzzPolicyLiteral(f *testing.F) {
	for _, s := range [][2]string{
		{".git/hooks/**", "a/.git/hooks/x"}, {".git/config", ".git/config"}, {".git", "x/.gitx"}, {"/build/**", "build"},
		{"/a/b", "a/b/c"}, {".envrc", "a.envrc"}, {"x/y", "x/x/y"}, {"/x", "y/x"}, {"a", "a/a/a"}, {".git/hooks/**", ".git/hook"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, rel string) {
		r, err := compileGlob(glob)
		if err != nil || r.lit == nil || rel == "" || strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") || strings.Contains(rel, "//") {
			return // not a literal rule, or not a real root-relative path
		}
		if lit, pat := r.matches(rel), r.matchPattern(rel); lit != pat {
			t.Fatalf("glob %q, path %q: literal matcher %v, doublestar %v", glob, rel, lit, pat)
		}
	})
}

// TestPolicyGlobMatchesAsProtect: a glob compiled alone (--rules) matches
// exactly the paths it matches as a --protect glob, and is refused where
// Compile refuses it.
func TestPolicyGlobMatchesAsProtect(t *testing.T) {
	globs := append(slices.Clone(DefaultProtect), "/build/**", "*.sh", "/a/*/c", "secrets", "{x,y}/z")
	rels := []string{"", ".git", "a/.git/config", ".gitx", "build", "build/x", "src/build", "run.sh", "d/run.sh/in",
		"a/b/c/d", "a/b/x/c", "secrets", "p/secrets/q", "secretsx", "x/z", "w/y/z/v", "w/z"}
	for _, g := range globs {
		one, err := CompileGlob(g)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", g, err)
		}
		r, err := Policy{Protect: []string{g}}.Compile()
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range rels {
			_, want := r.Protected(rel)
			if got := one.Match(rel); got != want {
				t.Errorf("CompileGlob(%q).Match(%q) = %v, --protect matches: %v", g, rel, got, want)
			}
		}
	}
	if one, _ := CompileGlob("*.sh"); !one.Match("run.sh") || one.Match("run.txt") {
		t.Error(`CompileGlob("*.sh") does not tell run.sh from run.txt`)
	}
	for _, g := range []string{"", "/", "a/", "//a", "a/../b", "[", "a\x00b"} {
		if _, err := CompileGlob(g); err == nil {
			t.Errorf("CompileGlob(%q) = nil error, want a refusal", g)
		}
	}
}

func TestPolicyFold(t *testing.T) {
	for in, want := range map[string]string{
		".GIT/CONFIG":              ".git/config",
		".Husky/pre-commit":        ".husky/pre-commit",
		".hus\u212ay":              ".husky",  // KELVIN SIGN
		"\u017f.envrc":             "s.envrc", // LONG S
		"STRASSE":                  "strasse",
		"Stra\u00dfe":              "strasse", // full folding: sharp s
		"caf\u00c9":                "cafe\u0301",
		"cafe\u0301":               "cafe\u0301",
		"\xff\xfeABC":              "\xff\xfeABC", // not UTF-8: bytes
		"plain/lower.txt":          "plain/lower.txt",
		"X.CODE-WORKSPACE/a/B.txt": "x.code-workspace/a/b.txt",
	} {
		if got := Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPolicyMatchFolded: the folded matchers find what the exact ones
// miss, for literal globs, doublestar globs, anchored globs and globs
// with upper-case letters; the rule reported is the operator's glob.
func TestPolicyMatchFolded(t *testing.T) {
	r, err := Policy{Protect: append(slices.Clone(DefaultProtect), "/Build/**"), Deny: []string{"*.key", "/Secrets"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ rel, want string }{
		{".GIT/CONFIG", ".git/config"},
		{"sub/.Git/Hooks/pre-commit", ".git/hooks/**"},
		{".ENVRC", ".envrc"},
		{"a/.hus\u212ay/pre-commit", ".husky/**"},
		{"P.Code-Workspace", "*.code-workspace"},
		{".MCP.JSON", ".mcp.json"},
		{"build/x", "/Build/**"},
		{"BUILD", "/Build/**"},
		{"src/build/x", ""},
		{".envrcx", ""},
		{"", ""},
	} {
		got, ok := r.ProtectedFolded(c.rel)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ProtectedFolded(%q) = %q, %v; want %q", c.rel, got, ok, c.want)
		}
	}
	for _, c := range []struct{ rel, want string }{
		{"ID.KEY", "--deny *.key"}, {"d/x.Key", "--deny *.key"}, {"secrets/a", "--deny /Secrets"}, {"SECRETS", "--deny /Secrets"}, {"d/secrets", ""}, {"x.keys", ""},
	} {
		got, ok := r.DeniedFolded(c.rel)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("DeniedFolded(%q) = %q, %v; want %q", c.rel, got, ok, c.want)
		}
	}
	// The exact matchers still compare bytes.
	if _, ok := r.Protected(".GIT/CONFIG"); ok {
		t.Error("Protected(.GIT/CONFIG) matched: exact matching must not fold")
	}
}

// TestPolicyRuleLines: after --deny, the first --rules line that matches a
// path decides; a deny line denies it (Denied names the line), any other
// leaves it. RGExcludes passes the deny lines before the first other
// line, never one an earlier line may let through.
func TestPolicyRuleLines(t *testing.T) {
	r, err := Policy{Deny: []string{"*.key"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var lines []RuleLine
	for _, v := range []string{"deny .env", "pass w/private/ok.txt", "deny /w/private"} {
		l, err := ParseRuleLine(v)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if _, err := ParseRuleLine("ask x"); err == nil {
		t.Error("ParseRuleLine accepted an action other than deny or pass")
	}
	if none, _ := (Policy{}).Compile(); none.WithLines(lines[1:2]).Denies() || !none.WithLines(lines[:1]).Denies() || none.WithLines(lines[:1]).Empty() {
		t.Error("Denies and Empty: a pass line denies nothing, a deny line something")
	}
	w := r.WithLines(lines)
	for rel, want := range map[string]string{
		"a/.env": "--rules deny .env", ".env/x": "--rules deny .env", "w/private/key.txt": "--rules deny /w/private",
		"w/private": "--rules deny /w/private", "w/private/ok.txt": "", "x.key": "--deny *.key", "w/private/ok.txt/k.key": "--deny *.key",
		"x/w/private/a": "", "w": "", "": "",
	} {
		if got, ok := w.Denied(rel); got != want || ok != (want != "") {
			t.Errorf("Denied(%q) = %q, %v; want %q", rel, got, ok, want)
		}
	}
	if _, ok := r.Denied("a/.env"); ok {
		t.Error("WithLines changed the policy it was called on")
	}
	if got, want := w.RGExcludes(""), []string{"--glob=!**/*.key", "--glob=!**/.env"}; !slices.Equal(got, want) {
		t.Errorf("RGExcludes = %q, want %q", got, want)
	}
	if got, want := r.WithLines([]RuleLine{lines[2], lines[0]}).RGExcludes("w"), []string{"--glob=!**/*.key", "--glob=!/private", "--glob=!**/.env"}; !slices.Equal(got, want) {
		t.Errorf("RGExcludes(w) = %q, want %q", got, want)
	}
	for _, l := range lines {
		if back, err := ParseRuleLine(strings.TrimPrefix(l.Arg(), "--rule=")); err != nil || back.Deny != l.Deny || back.Arg() != l.Arg() {
			t.Errorf("%q does not parse back: %v", l.Arg(), err)
		}
	}
}
