package worker

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// newQuarantineService serves a fresh root with a quarantine beside it,
// bounded by maxBytes, in-process and without Landlock.
func newQuarantineService(t *testing.T, maxBytes int64) (s *Service, root, qdir string) {
	t.Helper()
	base := t.TempDir()
	root, qdir = filepath.Join(base, "root"), filepath.Join(base, "quarantine")
	for _, d := range []string{root, qdir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return quarantineServiceOver(t, root, qdir, maxBytes), root, qdir
}

func quarantineServiceOver(t *testing.T, root, qdir string, maxBytes int64) *Service {
	t.Helper()
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	qf, err := os.Open(qdir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qf.Close() })
	q, err := OpenQuarantine(qf, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(r, Options{Quarantine: q, State: stateFor(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// quarantined lists the quarantine's entries.
func quarantined(t *testing.T, qdir string) []string {
	t.Helper()
	ents, err := os.ReadDir(qdir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func undoOf(t *testing.T, s *Service, token string) *fsmcpv1.UndoResponse {
	t.Helper()
	if token == "" {
		t.Fatal("no undo token")
	}
	resp, err := s.Undo(context.Background(), &fsmcpv1.UndoRequest{Token: token})
	if err != nil {
		t.Fatalf("Undo(%s) = %v", token, err)
	}
	return resp
}

// noHostPathIn fails if a token, decoded, holds any part of a host path.
func noHostPathIn(t *testing.T, token, dir string) {
	t.Helper()
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		if len(part) > 3 && (strings.Contains(token, part) || strings.Contains(string(raw), part)) {
			t.Fatalf("token %q names %q of %s", token, part, dir)
		}
	}
}

// Every mutating tool (write, append, replace, splice, delete) moves what
// it removes or replaces into the quarantine, without a copy (the same
// inode), and Undo brings it back.
func TestQuarantineEachMutationUndone(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 1<<20)
	wput(t, filepath.Join(root, "w"), "old w")
	wput(t, filepath.Join(root, "r"), "old r")
	wput(t, filepath.Join(root, "del"), "deleted")
	wput(t, filepath.Join(root, "tree", "a", "b"), "deep")
	if err := os.Symlink("w", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	var before syscall.Stat_t
	syscall.Stat(filepath.Join(root, "w"), &before)

	w, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("w"), Content: []byte("new w"), IfSha256: wsum([]byte("old w"))})
	if err != nil {
		t.Fatal(err)
	}
	names := quarantined(t, qdir)
	var kept syscall.Stat_t
	if len(names) != 1 || syscall.Stat(filepath.Join(qdir, names[0]), &kept) != nil || kept.Ino != before.Ino {
		t.Fatalf("the replaced file is not in the quarantine as the same inode: %v", names)
	}
	r, err := s.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: []byte("r"), IfSha256: wsum([]byte("old r")),
		Edits: []*fsmcpv1.Edit{{Old: []byte("old"), New: []byte("new")}}})
	if err != nil {
		t.Fatal(err)
	}
	wput(t, filepath.Join(root, "sp"), "old sp")
	sp, err := s.Splice(ctx, &fsmcpv1.SpliceRequest{Path: []byte("sp"), Offset: 0, Delete: 3, Insert: []byte("new"), IfSha256: wsum([]byte("old sp"))})
	if err != nil {
		t.Fatal(err)
	}
	// An append writes in place: nothing is displaced, and its undo cuts
	// it off the same inode.
	wput(t, filepath.Join(root, "ap"), "old ap")
	ap, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("ap"), Content: []byte("+"), Append: true, IfSha256: wsum([]byte("old ap"))})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, p := range []string{"del", "tree", "link"} {
		d, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte(p), Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Fatalf("%s still there after delete", p)
		}
		tokens = append(tokens, d.GetUndo())
	}
	if n := len(quarantined(t, qdir)); n != 6 {
		t.Fatalf("%d entries in the quarantine, want 6", n)
	}
	for _, tok := range append(tokens, w.GetUndo(), r.GetUndo(), sp.GetUndo(), ap.GetUndo()) {
		noHostPathIn(t, tok, root)
		noHostPathIn(t, tok, qdir)
	}
	for _, tok := range tokens {
		undoOf(t, s, tok)
	}
	if got := wcontent(t, filepath.Join(root, "tree", "a", "b")); got != "deep" {
		t.Errorf("restored tree holds %q", got)
	}
	if got := wcontent(t, filepath.Join(root, "del")); got != "deleted" {
		t.Errorf("restored file holds %q", got)
	}
	if target, err := os.Readlink(filepath.Join(root, "link")); err != nil || target != "w" {
		t.Errorf("restored symlink: %q, %v", target, err)
	}
	redo := undoOf(t, s, w.GetUndo())
	if got := wcontent(t, filepath.Join(root, "w")); got != "old w" {
		t.Errorf("undone write holds %q", got)
	}
	var after syscall.Stat_t
	syscall.Stat(filepath.Join(root, "w"), &after)
	if after.Ino != before.Ino {
		t.Error("undo brought back a copy, not the original inode")
	}
	undoOf(t, s, redo.GetUndo())
	if got := wcontent(t, filepath.Join(root, "w")); got != "new w" {
		t.Errorf("undo of the undo holds %q", got)
	}
	undoOf(t, s, r.GetUndo())
	if got := wcontent(t, filepath.Join(root, "r")); got != "old r" {
		t.Errorf("undone replace holds %q", got)
	}
	undoOf(t, s, sp.GetUndo())
	if got := wcontent(t, filepath.Join(root, "sp")); got != "old sp" {
		t.Errorf("undone splice holds %q", got)
	}
	var apBefore, apAfter syscall.Stat_t
	syscall.Stat(filepath.Join(root, "ap"), &apBefore)
	undoOf(t, s, ap.GetUndo())
	if got := wcontent(t, filepath.Join(root, "ap")); got != "old ap" {
		t.Errorf("undone append holds %q", got)
	}
	if syscall.Stat(filepath.Join(root, "ap"), &apAfter); apAfter.Ino != apBefore.Ino {
		t.Error("the undone append is another inode")
	}
	noTempLeft(t, root)
}

// Undo never overwrites a newer change: a second write, an in-place edit
// by another process, or a new file at a deleted path all refuse it with
// precondition_failed and leave the newer state.
func TestQuarantineUndoRefusedAfterNewerChange(t *testing.T) {
	ctx := context.Background()
	s, root, _ := newQuarantineService(t, 1<<20)
	p := filepath.Join(root, "f")
	wput(t, p, "v1")
	w1, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("v2"), IfSha256: wsum([]byte("v1"))})
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("f"), Content: []byte("v3"), IfSha256: wsum([]byte("v2"))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Undo(ctx, &fsmcpv1.UndoRequest{Token: w1.GetUndo()})
	wantWriteCode(t, "undo under a newer write", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "v3" {
		t.Fatalf("refused undo left %q", got)
	}
	// Another process edits the file in place: the write's token no
	// longer matches it.
	if err := os.WriteFile(p, []byte("v4"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.Undo(ctx, &fsmcpv1.UndoRequest{Token: w2.GetUndo()})
	wantWriteCode(t, "undo under an in-place edit", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "v4" {
		t.Fatalf("refused undo left %q", got)
	}
	// A delete's undo is refused while anything is at the path, and the
	// refusal keeps the token good: once the path is free, it restores.
	d, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("f")})
	if err != nil {
		t.Fatal(err)
	}
	wput(t, p, "new file")
	_, err = s.Undo(ctx, &fsmcpv1.UndoRequest{Token: d.GetUndo()})
	wantWriteCode(t, "undo of a delete onto a new file", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "new file" {
		t.Fatalf("refused undo left %q", got)
	}
	os.Remove(p)
	undoOf(t, s, d.GetUndo())
	if got := wcontent(t, p); got != "v4" {
		t.Fatalf("undone delete holds %q", got)
	}
}

// Tokens are sealed with the key in the state directory and bound to the
// root and the quarantine: altered, foreign or replayed ones are refused
// and change nothing, while a restarted worker over the same root,
// quarantine and state directory takes its predecessor's tokens.
func TestQuarantineTokens(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 1<<20)
	wput(t, filepath.Join(root, "f"), "x")
	d, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("f")})
	if err != nil {
		t.Fatal(err)
	}
	tok := []byte(d.GetUndo())
	tok[3] ^= 1
	for name, forged := range map[string]string{"altered": string(tok), "garbage": "x", "empty": "", "path": "../f"} {
		_, err := s.Undo(ctx, &fsmcpv1.UndoRequest{Token: forged})
		wantWriteCode(t, name, err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	}
	// Another root with the same quarantine, and even the same key: the
	// token names this root, so the other refuses it.
	otherRoot := filepath.Join(filepath.Dir(root), "other")
	if err := os.Mkdir(otherRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(root+".state", "quarantine-key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(otherRoot+".state", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(otherRoot+".state", "quarantine-key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	other := quarantineServiceOver(t, otherRoot, qdir, 1<<20)
	_, err = other.Undo(ctx, &fsmcpv1.UndoRequest{Token: d.GetUndo()})
	wantWriteCode(t, "another root's token", err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	if _, err := os.Lstat(filepath.Join(root, "f")); !os.IsNotExist(err) {
		t.Fatal("a refused token restored the file")
	}
	// A restart: the same root, quarantine and state directory.
	again := quarantineServiceOver(t, root, qdir, 1<<20)
	undoOf(t, again, d.GetUndo())
	os.Remove(filepath.Join(root, "f"))
	_, err = again.Undo(ctx, &fsmcpv1.UndoRequest{Token: d.GetUndo()})
	wantWriteCode(t, "replayed", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	third := quarantineServiceOver(t, root, qdir, 1<<20)
	_, err = third.Undo(ctx, &fsmcpv1.UndoRequest{Token: d.GetUndo()})
	wantWriteCode(t, "replayed after a restart", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if _, err := os.Lstat(filepath.Join(root, "f")); !os.IsNotExist(err) {
		t.Fatal("a replayed token restored something")
	}
}

// --quarantine-bytes bounds the quarantine: the oldest entries go first,
// their tokens are then not_found, and what earlier runs left is counted
// at start and goes before anything of this run.
func TestQuarantineBytesEvictsOldest(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 250)
	wput(t, filepath.Join(qdir, qPrefix+"0000000000000001-earlier"), strings.Repeat("e", 100))
	wput(t, filepath.Join(qdir, "not-ours"), strings.Repeat("n", 1000))
	s = quarantineServiceOver(t, root, qdir, 250)
	var tokens []string
	for i, n := range []string{"a", "b", "c"} {
		wput(t, filepath.Join(root, n), strings.Repeat(n, 100))
		d, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte(n)})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, d.GetUndo())
		if i == 1 {
			if _, err := os.Stat(filepath.Join(qdir, qPrefix+"0000000000000001-earlier")); !os.IsNotExist(err) {
				t.Error("the earlier run's entry was not evicted first")
			}
		}
	}
	var total int64
	for _, n := range quarantined(t, qdir) {
		if fi, err := os.Stat(filepath.Join(qdir, n)); err == nil && strings.HasPrefix(n, qPrefix) {
			total += fi.Size()
		}
	}
	if total > 250 {
		t.Errorf("the quarantine holds %d bytes, bound 250", total)
	}
	if _, err := os.Stat(filepath.Join(qdir, "not-ours")); err != nil {
		t.Errorf("a name that is not fsmcp's was touched: %v", err)
	}
	_, err := s.Undo(ctx, &fsmcpv1.UndoRequest{Token: tokens[0]})
	wantWriteCode(t, "evicted", err, fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND)
	undoOf(t, s, tokens[1])
	undoOf(t, s, tokens[2])
	// An entry larger than the whole bound cannot be kept: the delete
	// happens, and its reply has no token.
	wput(t, filepath.Join(root, "big"), strings.Repeat("B", 300))
	d, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("big")})
	if err != nil || d.GetUndo() != "" {
		t.Errorf("delete of an entry past the bound: %v, undo %q", err, d.GetUndo())
	}
}

// A fifo holds no data: deleting one unlinks it and gives no token; a
// non-empty directory without recursive is still not_empty, and stays; a
// guarded delete is checked before anything moves.
func TestQuarantineSpecialCases(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 1<<20)
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("fifo")})
	if err != nil || d.GetUndo() != "" {
		t.Errorf("fifo delete: %v, undo %q", err, d.GetUndo())
	}
	wput(t, filepath.Join(root, "dir", "f"), "x")
	_, err = s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("dir")})
	wantWriteCode(t, "delete of a full directory", err, fsmcpv1.ErrorCode_ERROR_CODE_NOT_EMPTY)
	if n := len(quarantined(t, qdir)); n != 0 {
		t.Errorf("%d entries in the quarantine, want none", n)
	}
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	if d, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("empty")}); err != nil || d.GetUndo() == "" {
		t.Errorf("delete of an empty directory: %v, undo %q", err, d.GetUndo())
	}
	// A guarded delete checks its precondition first, then quarantines.
	wput(t, filepath.Join(root, "g"), "guarded")
	_, err = s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("g"), IfSha256: wsum([]byte("other"))})
	wantWriteCode(t, "guarded delete, wrong hash", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, filepath.Join(root, "g")); got != "guarded" {
		t.Fatalf("refused guarded delete left %q", got)
	}
	gd, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("g"), IfSha256: wsum([]byte("guarded"))})
	if err != nil {
		t.Fatal(err)
	}
	undoOf(t, s, gd.GetUndo())
	if got := wcontent(t, filepath.Join(root, "g")); got != "guarded" {
		t.Fatalf("undone guarded delete holds %q", got)
	}
	noTempLeft(t, root)
	// A patch's dry run changes nothing and keeps nothing.
	wput(t, filepath.Join(root, "pf"), "one\n")
	patch := []byte("--- a/pf\n+++ b/pf\n@@ -1 +1 @@\n-one\n+two\n")
	pre := []*fsmcpv1.PatchPrecondition{{Path: []byte("pf"), Sha256: wsum([]byte("one\n"))}}
	before := len(quarantined(t, qdir))
	if r, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: patch, Preconditions: pre, DryRun: true}); err != nil || r.GetUndo() != "" {
		t.Errorf("dry-run patch with a quarantine: %v, undo %q", err, r.GetUndo())
	}
	if got := wcontent(t, filepath.Join(root, "pf")); got != "one\n" || len(quarantined(t, qdir)) != before {
		t.Fatalf("dry-run patch left %q, quarantine %v", got, quarantined(t, qdir))
	}
	// A file created by a write displaced nothing: no token.
	w, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("new"), Content: []byte("n"), MustNotExist: true})
	if err != nil || w.GetUndo() != "" {
		t.Errorf("create: %v, undo %q", err, w.GetUndo())
	}
}
