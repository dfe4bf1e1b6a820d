package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rewindTree is a root with a quarantine and a state directory beside
// it, holding files of several modes, one with an extended attribute and
// one with an ACL.
func rewindTree(t *testing.T) (root, qdir string, flags []string) {
	t.Helper()
	base := t.TempDir()
	root, qdir = filepath.Join(base, "root"), filepath.Join(base, "quarantine")
	for _, d := range []string{root, qdir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, root, map[string]string{
		"a.txt": "alpha\n", "b.txt": "bravo one\nbravo two\n", "c.txt": "charlie\n", "e.txt": "echo\n",
		"f.txt": "foxtrot\n", "g/h.txt": "hotel\n", "g/deep/k.txt": "kilo\n", "i.txt": "india\n", "sub/d.txt": "delta\n",
	})
	if err := os.Chmod(filepath.Join(root, "a.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "c.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(root, "a.txt"), "user.origin", []byte("checkpointed"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	if out, err := exec.Command("setfacl", "-m", "u:65534:r", filepath.Join(root, "b.txt")).CombinedOutput(); err != nil {
		t.Skipf("setfacl: %v: %s", err, out)
	}
	return root, qdir, []string{"--quarantine", qdir, "--state-dir", filepath.Join(base, "state")}
}

// treeSnapshot is every entry beneath root (temp names aside) with its
// type, mode, content and extended attributes (ACLs included).
func treeSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." || strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("mode %o", st.Mode)
		if d.Type().IsRegular() {
			v += " content " + string(readFile(t, p))
		}
		sz, _ := unix.Llistxattr(p, nil)
		if sz > 0 {
			buf := make([]byte, sz)
			n, _ := unix.Llistxattr(p, buf)
			names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
			slices.Sort(names)
			for _, name := range names {
				val := make([]byte, 256)
				m, _ := unix.Lgetxattr(p, name, val)
				v += fmt.Sprintf(" xattr %s=%x", name, val[:max(m, 0)])
			}
		}
		snap[rel] = v
		return nil
	})
	return snap
}

// snapshotDiff names the paths whose entries differ.
func snapshotDiff(a, b map[string]string) []string {
	var out []string
	for k := range a {
		if a[k] != b[k] {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// changeEverything changes the tree through every writing tool.
func changeEverything(s *server) {
	s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "ALPHA\n", "if_sha256": sha([]byte("alpha\n"))})
	s.wantOK("fs_replace", map[string]any{"path": "b.txt", "if_sha256": sha([]byte("bravo one\nbravo two\n")),
		"edits": []map[string]any{{"old": "two", "new": "TWO"}}})
	s.wantOK("fs_splice", map[string]any{"path": "c.txt", "if_sha256": sha([]byte("charlie\n")), "offset": 0, "delete": 1, "insert": "C"})
	s.wantOK("fs_write", map[string]any{"path": "e.txt", "content": "more\n", "append": true, "if_sha256": sha([]byte("echo\n"))})
	s.wantOK("fs_patch", map[string]any{"patch": "--- a/sub/d.txt\n+++ b/sub/d.txt\n@@ -1 +1 @@\n-delta\n+DELTA\n" +
		"--- /dev/null\n+++ b/new/p.txt\n@@ -0,0 +1 @@\n+papa\n",
		"if_sha256": map[string]any{"sub/d.txt": sha([]byte("delta\n")), "new/p.txt": nil}})
	s.wantOK("fs_copy", map[string]any{"from": "i.txt", "to": "i2.txt"})
	s.wantOK("fs_move", map[string]any{"from": "g", "to": "g2"})
	s.wantOK("fs_mkdir", map[string]any{"path": "m/n"})
	s.wantOK("fs_delete", map[string]any{"path": "f.txt"})
}

// TestRewindEndToEnd: a checkpoint, then a change through every writing
// tool (write, replace, splice, append, patch, copy, move, mkdir,
// delete); a dry run lists exactly those paths and changes nothing; the
// rewind brings back every byte, mode, extended attribute and ACL and
// removes every entry made since; its own undo token brings every edited
// file back, and the checkpoint it took before brings the whole edited
// tree back, directories included.
func TestRewindEndToEnd(t *testing.T) {
	root, _, flags := rewindTree(t)
	s := start(t, root, flags...)
	orig := treeSnapshot(t, root)
	cp := s.wantOK("fs_checkpoint", map[string]any{"label": "before the edits"})
	if cp.str("id") == "" || cp.num("files") != 9 || len(cp.str("tree_sha256")) != 64 {
		t.Fatalf("checkpoint: %s", cp.text)
	}
	if d := s.wantOK("fs_digest", map[string]any{}); d.str("tree_sha256") != cp.str("tree_sha256") {
		t.Fatalf("checkpoint tree_sha256 %s, fs_digest %s", cp.str("tree_sha256"), d.str("tree_sha256"))
	}
	changeEverything(s)
	changed := treeSnapshot(t, root)
	wantPaths := []string{"a.txt", "b.txt", "c.txt", "e.txt", "f.txt", "g", "g/deep", "g/deep/k.txt", "g/h.txt",
		"g2", "g2/deep", "g2/deep/k.txt", "g2/h.txt", "i2.txt", "m", "m/n", "new", "new/p.txt", "sub/d.txt"}
	if got := snapshotDiff(orig, changed); !slices.Equal(got, wantPaths) {
		t.Fatalf("the edits changed %q, want %q", got, wantPaths)
	}
	dry := s.wantOK("fs_rewind", map[string]any{"id": cp.str("id"), "dry_run": true})
	var listed []string
	for _, c := range dry.doc["changes"].([]any) {
		listed = append(listed, c.(map[string]any)["path"].(string))
	}
	slices.Sort(listed)
	if !slices.Equal(listed, wantPaths) {
		t.Fatalf("dry run lists %q, want %q", listed, wantPaths)
	}
	if !strings.Contains(dry.text, `"diff":"`) || !strings.Contains(dry.text, "-ALPHA") {
		t.Errorf("dry run shows no diff: %s", dry.text)
	}
	if got := snapshotDiff(changed, treeSnapshot(t, root)); len(got) > 0 {
		t.Fatalf("the dry run changed %q", got)
	}
	rw := s.wantOK("fs_rewind", map[string]any{"id": cp.str("id")})
	if got := snapshotDiff(orig, treeSnapshot(t, root)); len(got) > 0 {
		t.Fatalf("after the rewind these differ from the checkpoint: %q", got)
	}
	if rw.str("undo") == "" || rw.str("checkpoint") == "" {
		t.Fatalf("rewind reply: %s", rw.text)
	}
	// The rewind's own token brings every edited file back, in the
	// directories the rewind removed too.
	s.wantOK("fs_undo", map[string]any{"undo": rw.str("undo")})
	undone := treeSnapshot(t, root)
	for f, v := range changed {
		if strings.Contains(v, " content ") && undone[f] != v {
			t.Errorf("after undoing the rewind, %s is %q, want %q", f, undone[f], v)
		}
	}
	// And the checkpoint taken before the rewind is listed, newest first.
	list := s.wantOK("fs_checkpoints", map[string]any{})
	cps := list.doc["checkpoints"].([]any)
	if len(cps) != 2 || cps[0].(map[string]any)["id"] != rw.str("checkpoint") || cps[1].(map[string]any)["id"] != cp.str("id") {
		t.Fatalf("checkpoints: %s", list.text)
	}
	// Rewinding to that one redoes the edits, directories included.
	s.wantOK("fs_rewind", map[string]any{"id": rw.str("checkpoint")})
	if got := snapshotDiff(changed, treeSnapshot(t, root)); len(got) > 0 {
		t.Fatalf("after rewinding the rewind these differ from the edited tree: %q", got)
	}
}

// TestRewindUndo: a rewind's own undo token reverses it: the files it
// restored, created and removed are as the edits left them.
func TestRewindUndo(t *testing.T) {
	root, _, flags := rewindTree(t)
	s := start(t, root, flags...)
	cp := s.wantOK("fs_checkpoint", map[string]any{}).str("id")
	s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "ALPHA\n", "if_sha256": sha([]byte("alpha\n"))})
	s.wantOK("fs_write", map[string]any{"path": "sub/new.txt", "content": "new\n", "if_sha256": nil})
	s.wantOK("fs_delete", map[string]any{"path": "f.txt"})
	edited := treeSnapshot(t, root)
	rw := s.wantOK("fs_rewind", map[string]any{"id": cp})
	if _, err := os.Stat(filepath.Join(root, "sub/new.txt")); !os.IsNotExist(err) {
		t.Fatal("the rewind left sub/new.txt")
	}
	u := s.wantOK("fs_undo", map[string]any{"undo": rw.str("undo")})
	if got := snapshotDiff(edited, treeSnapshot(t, root)); len(got) > 0 {
		t.Fatalf("after undoing the rewind these differ from the edited tree: %q (%s)", got, u.text)
	}
	s.wantErr("fs_undo", map[string]any{"undo": rw.str("undo")}, "precondition_failed")
}

// TestRewindConflicts: a file the host changed after the checkpoint is a
// conflict that refuses the rewind and changes nothing; keep leaves it as
// it is and rewinds the rest; force rewinds it too, keeping the host's
// version for fs_undo. A file whose checkpointed bytes nothing kept is
// lost, which force does not override.
func TestRewindConflicts(t *testing.T) {
	root, _, flags := rewindTree(t)
	s := start(t, root, flags...)
	cp := s.wantOK("fs_checkpoint", map[string]any{}).str("id")
	s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "ALPHA\n", "if_sha256": sha([]byte("alpha\n"))})
	if err := os.WriteFile(filepath.Join(root, "b.txt"), []byte("host edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dry := s.wantOK("fs_rewind", map[string]any{"id": cp, "dry_run": true})
	if c, _ := dry.doc["conflicts"].([]any); len(c) != 1 || len(dry.doc["changes"].([]any)) != 1 {
		t.Fatalf("a dry run lists the change and the conflict: %s", dry.text)
	}
	refused := s.wantErr("fs_rewind", map[string]any{"id": cp}, "precondition_failed")
	conflicts := refused.doc["error"].(map[string]any)["conflicts"].([]any)
	if len(conflicts) != 1 || conflicts[0].(map[string]any)["path"] != "b.txt" {
		t.Fatalf("conflicts: %s", refused.text)
	}
	if got := string(readFile(t, filepath.Join(root, "a.txt"))); got != "ALPHA\n" {
		t.Fatalf("a refused rewind changed a.txt to %q", got)
	}
	s.wantOK("fs_rewind", map[string]any{"id": cp, "keep": []string{"b.txt"}})
	if a, b := string(readFile(t, filepath.Join(root, "a.txt"))), string(readFile(t, filepath.Join(root, "b.txt"))); a != "alpha\n" || b != "host edit\n" {
		t.Fatalf("keep: a.txt %q, b.txt %q", a, b)
	}
	// The host's b.txt replaced a version no tool kept: it is lost, a
	// conflict and no change.
	if d := s.wantOK("fs_rewind", map[string]any{"id": cp, "force": true, "dry_run": true}); len(d.doc["changes"].([]any)) != 0 {
		t.Fatalf("a lost path listed as a change: %s", d.text)
	}
	lost := s.wantErr("fs_rewind", map[string]any{"id": cp, "force": true}, "precondition_failed")
	if c := lost.doc["error"].(map[string]any)["conflicts"].([]any); len(c) != 1 || c[0].(map[string]any)["lost"] != true {
		t.Fatalf("lost: %s", lost.text)
	}
	// A tool's version of c.txt is kept; then the host edits it: force
	// rewinds it and keeps the host's version.
	cp2 := s.wantOK("fs_checkpoint", map[string]any{}).str("id")
	s.wantOK("fs_write", map[string]any{"path": "c.txt", "content": "tool\n", "if_sha256": sha([]byte("charlie\n"))})
	if err := os.WriteFile(filepath.Join(root, "c.txt"), []byte("host again\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.wantErr("fs_rewind", map[string]any{"id": cp2}, "precondition_failed")
	f := s.wantOK("fs_rewind", map[string]any{"id": cp2, "force": true})
	if got := string(readFile(t, filepath.Join(root, "c.txt"))); got != "charlie\n" {
		t.Fatalf("force left c.txt %q", got)
	}
	s.wantOK("fs_undo", map[string]any{"undo": f.str("undo")})
	if got := string(readFile(t, filepath.Join(root, "c.txt"))); got != "host again\n" {
		t.Fatalf("the forced rewind's undo left c.txt %q, want the host's version back", got)
	}
}

// TestRewindAfterRestart: a checkpoint taken by one fsmcp is rewound by
// the next, and an undo token issued before the restart still works.
func TestRewindAfterRestart(t *testing.T) {
	root, _, flags := rewindTree(t)
	orig := treeSnapshot(t, root)
	s := start(t, root, flags...)
	cp := s.wantOK("fs_checkpoint", map[string]any{"label": "first run"}).str("id")
	changeEverything(s)
	w := s.wantOK("fs_write", map[string]any{"path": "i.txt", "content": "INDIA\n", "if_sha256": sha([]byte("india\n"))})
	s.session.Close()
	s.wait(10 * time.Second)

	s = start(t, root, flags...)
	list := s.wantOK("fs_checkpoints", map[string]any{})
	if cps := list.doc["checkpoints"].([]any); len(cps) != 1 || cps[0].(map[string]any)["label"] != "first run" {
		t.Fatalf("after a restart: %s", list.text)
	}
	s.wantOK("fs_undo", map[string]any{"undo": w.str("undo")})
	if got := string(readFile(t, filepath.Join(root, "i.txt"))); got != "india\n" {
		t.Fatalf("the token from before the restart left i.txt %q", got)
	}
	s.wantOK("fs_rewind", map[string]any{"id": cp})
	if got := snapshotDiff(orig, treeSnapshot(t, root)); len(got) > 0 {
		t.Fatalf("after a restart and a rewind these differ: %q", got)
	}
}

// TestRewindEviction: under a small --quarantine-bytes, a change whose
// kept version pushes out one a checkpoint needs evicts that checkpoint,
// oldest first, and the reply that did it says so.
func TestRewindEviction(t *testing.T) {
	root, _, flags := rewindTree(t)
	big := strings.Repeat("x", 3000)
	writeTree(t, root, map[string]string{"big1": big, "big2": big})
	s := start(t, root, append(flags, "--quarantine-bytes", "4000")...)
	first := s.wantOK("fs_checkpoint", map[string]any{"label": "one"}).str("id")
	s.wantOK("fs_write", map[string]any{"path": "big1", "content": "small", "if_sha256": sha([]byte(big))})
	second := s.wantOK("fs_checkpoint", map[string]any{"label": "two"}).str("id")
	r := s.wantOK("fs_write", map[string]any{"path": "big2", "content": "small", "if_sha256": sha([]byte(big))})
	if r.str("evicted_checkpoint") != first {
		t.Fatalf("the evicting write says %s, want evicted_checkpoint %s", r.text, first)
	}
	list := s.wantOK("fs_checkpoints", map[string]any{})
	if cps := list.doc["checkpoints"].([]any); len(cps) != 1 || cps[0].(map[string]any)["id"] != second {
		t.Fatalf("after eviction: %s", list.text)
	}
	s.wantErr("fs_rewind", map[string]any{"id": first}, "not_found")
	s.wantOK("fs_rewind", map[string]any{"id": second})
	if got := string(readFile(t, filepath.Join(root, "big2"))); got != big {
		t.Fatalf("big2 after the rewind: %d bytes", len(got))
	}
}

// TestRewindTokens: an undo token altered, or one from another root's
// server sharing the quarantine, is refused.
func TestRewindTokens(t *testing.T) {
	root, qdir, flags := rewindTree(t)
	s := start(t, root, flags...)
	cp := s.wantOK("fs_checkpoint", map[string]any{}).str("id")
	s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "ALPHA\n", "if_sha256": sha([]byte("alpha\n"))})
	rw := s.wantOK("fs_rewind", map[string]any{"id": cp})
	forged := []byte(rw.str("undo"))
	forged[5] ^= 4
	s.wantErr("fs_undo", map[string]any{"undo": string(forged)}, "invalid_argument")
	other := filepath.Join(filepath.Dir(root), "other")
	writeTree(t, other, map[string]string{"a.txt": "ALPHA\n"})
	o := start(t, other, "--quarantine", qdir, "--state-dir", filepath.Join(filepath.Dir(root), "state2"))
	o.wantErr("fs_undo", map[string]any{"undo": rw.str("undo")}, "invalid_argument")
	o.wantErr("fs_rewind", map[string]any{"id": cp}, "not_found")
	s.wantOK("fs_undo", map[string]any{"undo": rw.str("undo")})
	if got := string(readFile(t, filepath.Join(root, "a.txt"))); got != "ALPHA\n" {
		t.Fatalf("a.txt %q", got)
	}
}

// TestRewindPolicy: a rewind never writes a protected path and never
// shows a denied one's content; under --rules, an ask line on a name
// beneath the rewound path refuses the rewind.
func TestRewindPolicy(t *testing.T) {
	root, _, flags := rewindTree(t)
	writeTree(t, root, map[string]string{"secret.key": "hunter2\n", "prot/x.txt": "x\n"})
	s := start(t, root, append(flags, "--deny", "*.key", "--protect", "prot/**")...)
	cp := s.wantOK("fs_checkpoint", map[string]any{}).str("id")
	s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "ALPHA\n", "if_sha256": sha([]byte("alpha\n"))})
	for name, content := range map[string]string{"secret.key": "hunter3\n", "prot/x.txt": "host\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dry := s.wantOK("fs_rewind", map[string]any{"id": cp, "dry_run": true})
	if strings.Contains(dry.text, "secret") || strings.Contains(dry.text, "hunter") {
		t.Fatalf("a dry run shows a denied path: %s", dry.text)
	}
	s.wantOK("fs_rewind", map[string]any{"id": cp})
	if got := string(readFile(t, filepath.Join(root, "prot/x.txt"))); got != "host\n" {
		t.Fatalf("the rewind wrote the protected prot/x.txt: %q", got)
	}
	if got := string(readFile(t, filepath.Join(root, "a.txt"))); got != "alpha\n" {
		t.Fatalf("a.txt %q", got)
	}
	s.session.Close()
	s.wait(10 * time.Second)

	rules := rulesFile(t, root, "ask fs_rewind m\n")
	r := start(t, root, append(flags, "--rules", rules)...)
	cp = r.wantOK("fs_checkpoint", map[string]any{}).str("id")
	r.wantOK("fs_mkdir", map[string]any{"path": "m"})
	r.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "ALPHA\n", "if_sha256": sha([]byte("alpha\n"))})
	// The call names "." (allowed); the directory m beneath it, which
	// the rewind would remove, falls under the ask line: the whole
	// rewind is refused, its dry run too.
	for _, dry := range []bool{true, false} {
		refused := r.wantErr("fs_rewind", map[string]any{"id": cp, "path": ".", "dry_run": dry}, "permission_denied")
		if !strings.Contains(refused.text, `\"m\"`) || !strings.Contains(refused.text, "line 1") {
			t.Fatalf("refusal names no m: %s", refused.text)
		}
	}
	if got := string(readFile(t, filepath.Join(root, "a.txt"))); got != "ALPHA\n" {
		t.Fatalf("a refused rewind changed a.txt to %q", got)
	}
	// A rewind of a.txt alone changes nothing the ask line covers.
	r.wantOK("fs_rewind", map[string]any{"id": cp, "path": "a.txt"})
	if got := string(readFile(t, filepath.Join(root, "a.txt"))); got != "alpha\n" {
		t.Fatalf("a rewind of a.txt left %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "m")); err != nil {
		t.Fatalf("a rewind of a.txt removed m: %v", err)
	}
}
