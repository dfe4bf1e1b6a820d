package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCaseFolding: on ext4 with casefold, in a directory with the
// casefold flag (chattr +F), protected and denied names match as the
// directory matches names: ".ENVRC" there is ".envrc", ".CLAUDE" is
// ".claude", a Kelvin sign is a "k", and a repository's hooks directory
// named in another case is still its hooks directory. In a directory
// without the flag on the same filesystem, names keep their case.
func TestPolicyCaseFolding(t *testing.T) {
	if _, err := os.Stat("/sys/fs/ext4/features/casefold"); err != nil {
		t.Skip("this kernel's ext4 has no casefold (built without CONFIG_UNICODE): /sys/fs/ext4/features/casefold is missing")
	}
	mnt := mountImage(t, "mkfs.ext4", "e2fsprogs", 64<<20, "-q", "-F", "-O", "casefold")
	ci, plain := filepath.Join(mnt, "ci"), filepath.Join(mnt, "plain")
	for _, d := range []string{ci, plain} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chattr", "+F", ci).CombinedOutput(); err != nil {
		t.Skipf("chattr +F: the kernel has no casefold here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// The directory really folds: a name in another case is the same file.
	putFile(t, filepath.Join(ci, ".envrc"), "export A=1\n", 0o644)
	if _, err := os.Stat(filepath.Join(ci, ".ENVRC")); err != nil {
		t.Fatalf("%s does not fold case: %v", ci, err)
	}
	putFile(t, filepath.Join(plain, ".envrc"), "export A=1\n", 0o644)
	putFile(t, filepath.Join(ci, "SECRET.KEY"), "KEY-DENIED\n", 0o600)
	putFile(t, filepath.Join(plain, "SECRET.KEY"), "readable here\n", 0o600)
	putFile(t, filepath.Join(ci, "src", "main.go"), "package main\n", 0o644)
	marker := filepath.Join(t.TempDir(), "hook-ran")
	payload := "#!/bin/sh\necho ran > " + marker + "\n"
	git(t, ci, "init", "-q")
	git(t, ci, "config", "core.hooksPath", "githooks")

	s := start(t, mnt, "--deny", "*.key")
	before := snapshot(t, mnt)
	for _, c := range []struct{ path, rule string }{
		{"ci/.ENVRC", ".envrc"},
		{"ci/.EnvRC", ".envrc"},
		{"ci/.MCP.JSON", ".mcp.json"},
		{"ci/proj.CODE-WORKSPACE", "*.code-workspace"},
		{"ci/src/.Mcp.Json", ".mcp.json"},
	} {
		s.wantPolicy("fs_write", map[string]any{"path": c.path, "content": payload, "if_sha256": nil}, c.rule)
	}
	s.wantPolicy("fs_write", map[string]any{"path": "ci/.ENVRC", "content": payload,
		"if_sha256": sha([]byte("export A=1\n"))}, ".envrc")
	s.wantPolicy("fs_mkdir", map[string]any{"path": "ci/.CLAUDE"}, ".claude/**")
	s.wantPolicy("fs_mkdir", map[string]any{"path": "ci/.hus\u212ay"}, ".husky/**") // KELVIN SIGN
	s.wantPolicy("fs_mkdir", map[string]any{"path": "ci/GITHOOKS"}, "derived from ci/.git/config")
	s.wantPolicy("fs_move", map[string]any{"from": "ci/src", "to": "ci/.VSCODE"}, ".vscode/**")
	s.wantPolicy("fs_copy", map[string]any{"from": "ci/src/main.go", "to": "ci/.Envrc"}, ".envrc")
	s.wantPolicy("fs_read", map[string]any{"path": "ci/SECRET.KEY"}, "--deny *.key")
	if r := s.wantOK("fs_stat", map[string]any{"path": "ci/SECRET.KEY"}); r.str("sha256") != "" {
		t.Fatalf("fs_stat of a denied file in a folding directory gave its sha256: %s", r.text)
	}
	sameSnapshot(t, "refused in the folding directory", before, snapshot(t, mnt))

	// Where names keep their case, other names are other files.
	s.wantOK("fs_write", map[string]any{"path": "plain/.ENVRC", "content": "not direnv's\n", "if_sha256": nil})
	s.wantOK("fs_mkdir", map[string]any{"path": "plain/.CLAUDE"})
	if r := s.wantOK("fs_read", map[string]any{"path": "plain/SECRET.KEY"}); !strings.Contains(r.text, "readable here") {
		t.Fatalf("fs_read plain/SECRET.KEY: %s", r.text)
	}
	// The host's commit in the folding repository runs nothing planted.
	hostCommit(t, ci, marker, "casefold")
	controlHook(t, ci, "githooks/pre-commit", marker, payload)
}

// TestPolicyFoldProbeConfined: the confined worker can ask a directory
// whether it folds case. Were fstatfs or FS_IOC_GETFLAGS refused by its
// Landlock domain or seccomp filter, every directory would look
// case-sensitive and case folding would silently protect nothing. A
// filesystem without inode flags answers ENOTTY, which is no refusal.
func TestPolicyFoldProbeConfined(t *testing.T) {
	root := t.TempDir()
	s := start(t, root)
	if got := s.hook("dirflags", root); got != "ok" && !strings.Contains(got, "inappropriate ioctl") {
		t.Fatalf("fstatfs and FS_IOC_GETFLAGS on the root from the confined worker = %q, want ok", got)
	}
}
