package main

import (
	"path/filepath"
	"testing"
)

// hostExecutorDefaults are the default globs for files that agents,
// editors, dev containers, husky and hg run on the host, each with a file
// it covers and a name under it that does not exist yet.
var hostExecutorDefaults = []struct{ rule, file, missing string }{
	{".mcp.json", ".mcp.json", ""},
	{".claude/**", ".claude/settings.json", ".claude/settings.local.json"},
	{".cursor/**", ".cursor/mcp.json", ".cursor/new.json"},
	{".codex/**", ".codex/config.toml", ".codex/new.toml"},
	{".gemini/**", ".gemini/settings.json", ".gemini/new.json"},
	{".windsurf/**", ".windsurf/rules.md", ".windsurf/new.md"},
	{".continue/**", ".continue/config.json", ".continue/new.json"},
	{".devcontainer/**", ".devcontainer/devcontainer.json", ".devcontainer/post.sh"},
	{"*.code-workspace", "proj.code-workspace", "other.code-workspace"},
	{".husky/**", ".husky/pre-commit", ".husky/pre-push"},
	{".hg/hgrc", ".hg/hgrc", ""},
}

// TestPolicyHostExecutorDefaults: every default added for the host's
// executors refuses every mutating tool (write, append, splice, replace,
// patch, copy to and from, move to and from, delete, mkdir), on a file
// that exists and on a name that does not, at the root and nested; the
// directories themselves cannot be deleted or moved away.
func TestPolicyHostExecutorDefaults(t *testing.T) {
	root := policyTree(t)
	for _, c := range hostExecutorDefaults {
		for _, dir := range []string{"", "pkg/app"} {
			putFile(t, filepath.Join(root, dir, c.file), "run = sh evil.sh\n", 0o644)
		}
	}
	s := start(t, root)
	before := snapshot(t, root)
	for _, c := range hostExecutorDefaults {
		for _, dir := range []string{"", "pkg/app"} {
			s.wantPolicyAll(mutations(t, root, filepath.Join(dir, c.file)), c.rule)
			if c.missing != "" {
				s.wantPolicyAll(mutations(t, root, filepath.Join(dir, c.missing)), c.rule)
			}
			if d := filepath.Dir(c.file); d != "." {
				s.wantPolicy("fs_delete", map[string]any{"path": filepath.Join(dir, d), "recursive": true}, c.rule)
				s.wantPolicy("fs_move", map[string]any{"from": filepath.Join(dir, d), "to": "elsewhere"}, c.rule)
			}
		}
	}
	// Beneath a directory that does not exist yet.
	s.wantPolicy("fs_mkdir", map[string]any{"path": "new/deep/.claude/commands"}, ".claude/**")
	sameSnapshot(t, "refused mutations", before, snapshot(t, root))
	// Beside them, the same tools work.
	s.wantOK("fs_write", map[string]any{"path": "pkg/app/mcp.json", "content": "{}", "if_sha256": nil})
	s.wantOK("fs_write", map[string]any{"path": "pkg/app/.claude.md", "content": "x", "if_sha256": nil})
	s.wantOK("fs_mkdir", map[string]any{"path": "pkg/app/husky"})
}
