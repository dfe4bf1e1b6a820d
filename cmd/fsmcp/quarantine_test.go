package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// quarantineTree is tree(t) with a quarantine directory beside the root.
func quarantineTree(t *testing.T) (root, qdir string) {
	t.Helper()
	root, _ = tree(t)
	qdir = filepath.Join(filepath.Dir(root), "quarantine")
	if err := os.Mkdir(qdir, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, qdir
}

// TestQuarantineEndToEnd: through the confined worker, fs_write,
// fs_replace and fs_delete replies carry an undo token, fs_undo restores
// each, an undo of a write can itself be undone, and the audit log records
// the tokens issued and spent. A newer write refuses the older token, and a
// forged one is refused.
func TestQuarantineEndToEnd(t *testing.T) {
	root, qdir := quarantineTree(t)
	s := start(t, root, "--quarantine", qdir)
	a := filepath.Join(root, "a.txt")
	w := s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "second\n", "if_sha256": sha([]byte("hello\n"))})
	r := s.wantOK("fs_replace", map[string]any{"path": "a.txt", "if_sha256": sha([]byte("second\n")),
		"edits": []map[string]any{{"old": "second", "new": "third"}}})
	d := s.wantOK("fs_delete", map[string]any{"path": "sub", "recursive": true})
	for _, rep := range []reply{w, r, d} {
		if rep.str("undo") == "" {
			t.Fatalf("no undo token: %s", rep.text)
		}
		noHostPath(t, rep.text, filepath.Dir(root))
	}
	if _, err := os.Stat(filepath.Join(root, "sub")); !os.IsNotExist(err) {
		t.Fatal("sub still there")
	}
	s.wantErr("fs_undo", map[string]any{"undo": w.str("undo")}, "precondition_failed")
	if got := string(readFile(t, a)); got != "third\n" {
		t.Fatalf("refused undo left %q", got)
	}
	forged := []byte(r.str("undo"))
	forged[0] ^= 2
	s.wantErr("fs_undo", map[string]any{"undo": string(forged)}, "invalid_argument")
	u := s.wantOK("fs_undo", map[string]any{"undo": r.str("undo")})
	if got := string(readFile(t, a)); got != "second\n" || u.str("path") != "a.txt" || u.str("type") != "file" {
		t.Fatalf("undone replace: %q, reply %s", got, u.text)
	}
	uw := s.wantOK("fs_undo", map[string]any{"undo": w.str("undo")})
	if got := string(readFile(t, a)); got != "hello\n" {
		t.Fatalf("undone write holds %q", got)
	}
	s.wantOK("fs_undo", map[string]any{"undo": d.str("undo")})
	if got := string(readFile(t, filepath.Join(root, "sub", "b.txt"))); got != "bee\n" {
		t.Fatalf("undone delete holds %q", got)
	}
	s.wantErr("fs_undo", map[string]any{"undo": d.str("undo")}, "precondition_failed")
	// The replace's undo was followed by the write's: undoing it again
	// would lose that; undoing the last undo redoes the write.
	s.wantErr("fs_undo", map[string]any{"undo": u.str("undo")}, "precondition_failed")
	redo := s.wantOK("fs_undo", map[string]any{"undo": uw.str("undo")})
	if got := string(readFile(t, a)); got != "second\n" || redo.str("undo") == "" {
		t.Fatalf("undo of an undo: %q, %s", got, redo.text)
	}
	var issued, spent int
	waitFor(t, func() bool { return len(auditLines(t, s.stderr.String())) >= 11 })
	for _, e := range auditLines(t, s.stderr.String()) {
		if e.Undo != "" {
			issued++
		}
		if e.Undone != "" {
			spent++
		}
	}
	if issued != 6 || spent != 8 {
		t.Errorf("audit: %d tokens issued, %d spent; want 6 and 8", issued, spent)
	}
}

// TestQuarantineStartupRefusals: a quarantine that could not work is a
// start-up error: missing, inside the root, holding the root, under
// --read-only, or on another filesystem.
func TestQuarantineStartupRefusals(t *testing.T) {
	root, qdir := quarantineTree(t)
	cases := map[string][]string{
		"missing":      {"--quarantine", filepath.Join(qdir, "nope")},
		"inside root":  {"--quarantine", filepath.Join(root, "sub")},
		"holding root": {"--quarantine", filepath.Dir(root)},
		"read-only":    {"--quarantine", qdir, "--read-only"},
		"negative":     {"--quarantine", qdir, "--quarantine-bytes", "-1"},
	}
	var rs, ss syscall.Stat_t
	if syscall.Stat(root, &rs) == nil && syscall.Stat("/dev/shm", &ss) == nil && rs.Dev != ss.Dev {
		other, err := os.MkdirTemp("/dev/shm", "fsmcp-quarantine-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(other) })
		cases["other filesystem"] = []string{"--quarantine", other}
	} else {
		t.Log("/dev/shm is on the root's filesystem: the other-filesystem case is not run")
	}
	for name, flags := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := fsmcpCommand(root, flags...)
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
				t.Fatalf("fsmcp %v: %v, want exit 2", flags, err)
			}
			if !strings.Contains(stderr.String(), "--quarantine") || stdout.String() != "" {
				t.Errorf("stderr %q, stdout %q", stderr.String(), stdout.String())
			}
		})
	}
}

// TestQuarantinePatchEndToEnd: through the confined worker, a real
// fs_patch that changes a.txt, deletes sub/b.txt and creates new.txt
// replies with one undo token; fs_undo with it restores all three and
// names them; the patch's token is then spent.
func TestQuarantinePatchEndToEnd(t *testing.T) {
	root, qdir := quarantineTree(t)
	s := start(t, root, "--quarantine", qdir)
	patch := "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello\n+patched\n" +
		"--- a/sub/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bee\n" +
		"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n"
	p := s.wantOK("fs_patch", map[string]any{"patch": patch, "if_sha256": map[string]any{
		"a.txt": sha([]byte("hello\n")), "sub/b.txt": sha([]byte("bee\n")), "new.txt": nil}})
	if p.str("undo") == "" {
		t.Fatalf("no undo token: %s", p.text)
	}
	noHostPath(t, p.text, filepath.Dir(root))
	if !exists(t, filepath.Join(root, "new.txt")) || exists(t, filepath.Join(root, "sub", "b.txt")) {
		t.Fatal("the patch was not applied")
	}
	u := s.wantOK("fs_undo", map[string]any{"undo": p.str("undo")})
	if got := string(readFile(t, filepath.Join(root, "a.txt"))); got != "hello\n" {
		t.Errorf("a.txt = %q after the undo", got)
	}
	if got := string(readFile(t, filepath.Join(root, "sub", "b.txt"))); got != "bee\n" {
		t.Errorf("sub/b.txt = %q after the undo", got)
	}
	if exists(t, filepath.Join(root, "new.txt")) {
		t.Error("new.txt is still there after the undo")
	}
	paths, _ := u.doc["paths"].([]any)
	if len(paths) != 3 || u.str("undo") == "" {
		t.Errorf("undo reply: %s", u.text)
	}
	s.wantErr("fs_undo", map[string]any{"undo": p.str("undo")}, "precondition_failed")
}
