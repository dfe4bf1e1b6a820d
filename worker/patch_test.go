package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/hunks"
	"github.com/fsmcp/fsmcp/worker/internal/patchlog"
)

// threePatch changes a, b and c (in that order of names) from "x\n" to
// "y\n".
func threePatch() []byte {
	var b strings.Builder
	for _, n := range []string{"a", "b", "c"} {
		b.WriteString("--- a/" + n + "\n+++ b/" + n + "\n@@ -1 +1 @@\n-x\n+y\n")
	}
	return []byte(b.String())
}

func threePre() []*fsmcpv1.PatchPrecondition {
	var pre []*fsmcpv1.PatchPrecondition
	for _, n := range []string{"a", "b", "c"} {
		pre = append(pre, &fsmcpv1.PatchPrecondition{Path: []byte(n), Sha256: wsum([]byte("x\n"))})
	}
	return pre
}

// A file changed behind the worker's back between the checks and the
// commit makes the patch fail at that file, and the files already placed
// are put back: all three stay "x", the intruder's bytes are kept, no
// journal or temp file is left.
func TestPatchRollsBackOnLostRace(t *testing.T) {
	for _, victim := range []string{"a", "b", "c"} {
		t.Run(victim, func(t *testing.T) {
			s, dir := newWriteService(t)
			for _, n := range []string{"a", "b", "c"} {
				wput(t, filepath.Join(dir, n), "x\n")
			}
			s.beforeCommit = func(p string) {
				if p == victim {
					wput(t, filepath.Join(dir, "intruder"), "intruder\n")
					if err := os.Rename(filepath.Join(dir, "intruder"), filepath.Join(dir, victim)); err != nil {
						t.Fatal(err)
					}
				}
			}
			_, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: threePatch(), Preconditions: threePre()})
			wantWriteCode(t, "Patch", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
			for _, n := range []string{"a", "b", "c"} {
				want := "x\n"
				if n == victim {
					want = "intruder\n"
				}
				if got := wcontent(t, filepath.Join(dir, n)); got != want {
					t.Errorf("%s = %q, want %q", n, got, want)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 3 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}
}

// recoverJournals undoes a journal's patch from any point of its commit: with
// the first k files placed, for every k, and with a journal cut short.
func TestPatchRecoverUndoes(t *testing.T) {
	for placed := 0; placed <= 3; placed++ {
		s, dir := newWriteService(t)
		for _, n := range []string{"a", "b", "c"} {
			wput(t, filepath.Join(dir, n), "x\n")
		}
		// Stage, journal and place the first placed files by hand, as
		// commitAll does, and stop: this is what a crash leaves.
		files, err := parsePatch(threePatch())
		if err != nil {
			t.Fatal(err)
		}
		if err := matchPreconditions(files, threePre(), false); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		stageByHand(t, s, files)
		j := &patchlog.Journal{RootDev: s.rootDev, RootIno: s.rootIno}
		for _, f := range files {
			j.Entries = append(j.Entries, f.entry())
		}
		if _, err := patchlog.Write(int(s.state.Fd()), j); err != nil {
			t.Fatal(err)
		}
		for _, f := range files[:placed] {
			if _, err := s.place(ctx, f.st, f.base, f.path, f.cur); err != nil {
				t.Fatal(err)
			}
		}
		// A journal cut short while it was written, before its rename:
		// nothing to undo, and it goes too.
		os.WriteFile(filepath.Join(s.state.Name(), patchlog.Partial+"torn"), []byte(`{"entries":[{"di`), 0o600)
		r, err := s.recoverJournals("")
		if err != nil || r.Undone != 1 || len(r.SetAside) != 0 {
			t.Fatalf("placed %d: Recover() = %+v, %v; want 1 undone, nil", placed, r, err)
		}
		for _, name := range []string{"a", "b", "c"} {
			if got := wcontent(t, filepath.Join(dir, name)); got != "x\n" {
				t.Errorf("placed %d: %s = %q after recovery, want the old content", placed, name, got)
			}
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 3 {
			t.Errorf("placed %d: left behind after recovery: %v", placed, entries)
		}
		if entries, _ := os.ReadDir(s.state.Name()); len(entries) != 0 {
			t.Errorf("placed %d: left in the state directory after recovery: %v", placed, entries)
		}
	}
}

// stageByHand resolves, reads, patches and stages every file as Patch and
// commitAll do, without placing any: a deleted file gets the temp name it
// would move to.
func stageByHand(t *testing.T, s *Service, files []*patchFile) {
	t.Helper()
	ctx := context.Background()
	for _, f := range files {
		d, base, err := s.openName(ctx, "patch", f.path, accessRewrite)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.close)
		f.d, f.base, f.td, f.dirRel = d, base, d, d.rel
		if f.cur, err = s.current(ctx, "patch", d, base, f.path, true); err != nil {
			t.Fatal(err)
		}
		if f.data, err = hunks.ApplyDiff(f.path, f.cur.data, f.frags, f.delete); err != nil {
			t.Fatal(err)
		}
		if f.delete {
			f.tmp = tempName()
			continue
		}
		if f.st, err = s.stage(ctx, d, f.path, f.cur, &body{data: f.data}); err != nil {
			t.Fatal(err)
		}
		f.tmp = f.st.tmp
	}
}

// The editing RPCs reach files only through the resolver, so the
// operator's policy applies to them: nothing protected is spliced,
// appended, patched, copied to or from, or removed or moved by a guarded
// call; nothing denied is digested, copied or hashed for a guard.
func TestEditRPCsFollowThePolicy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root")
	wput(t, filepath.Join(dir, ".git", "config"), "[core]\n")
	wput(t, filepath.Join(dir, "secret", "key"), "hunter2\n")
	wput(t, filepath.Join(dir, "ok.txt"), "x\n")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s, err := New(root, Options{Policy: sandbox.Policy{Protect: sandbox.DefaultProtect, Deny: []string{"secret/**"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := wsum([]byte("[core]\n"))
	key := wsum([]byte("hunter2\n"))
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Splice protected", func() error {
			_, err := s.Splice(ctx, &fsmcpv1.SpliceRequest{Path: []byte(".git/config"), Offset: 0, Insert: []byte("x"), IfSha256: cfg})
			return err
		}},
		{"Splice protected, dry run", func() error {
			_, err := s.Splice(ctx, &fsmcpv1.SpliceRequest{Path: []byte("secret/../.git/config"), Insert: []byte("x"), IfSha256: cfg, DryRun: true})
			return err
		}},
		{"Append protected", func() error {
			_, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte(".git/config"), Content: []byte("x"), IfSha256: cfg, Append: true})
			return err
		}},
		{"Patch protected", func() error {
			_, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte("--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-x\n+y\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-[core]\n+[core2]\n"),
				Preconditions: []*fsmcpv1.PatchPrecondition{{Path: []byte("ok.txt"), Sha256: wsum([]byte("x\n"))}, {Path: []byte(".git/config"), Sha256: cfg}}})
			return err
		}},
		{"Copy to protected", func() error {
			_, err := s.Copy(ctx, &fsmcpv1.CopyRequest{From: []byte("ok.txt"), To: []byte(".git/hooks")})
			return err
		}},
		{"Copy from protected", func() error {
			_, err := s.Copy(ctx, &fsmcpv1.CopyRequest{From: []byte(".git"), To: []byte("git2"), Recursive: true})
			return err
		}},
		{"Copy from denied", func() error {
			_, err := s.Copy(ctx, &fsmcpv1.CopyRequest{From: []byte("secret/key"), To: []byte("key2")})
			return err
		}},
		{"Copy a tree holding denied", func() error {
			_, err := s.Copy(ctx, &fsmcpv1.CopyRequest{From: []byte("secret"), To: []byte("s2"), Recursive: true})
			return err
		}},
		{"Delete guarded protected", func() error {
			_, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte(".git/config"), IfSha256: cfg})
			return err
		}},
		{"Delete guarded denied", func() error {
			_, err := s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("secret/key"), IfSha256: key})
			return err
		}},
		{"Move guarded protected", func() error {
			_, err := s.Move(ctx, &fsmcpv1.MoveRequest{From: []byte(".git/config"), To: []byte("c"), IfSha256: cfg})
			return err
		}},
	} {
		err := c.call()
		var e *Error
		if !errors.As(err, &e) || e.Code != fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED || !e.PolicyViolation {
			t.Errorf("%s = %v, want a policy refusal", c.name, err)
		}
	}
	// A digest of a tree holding denied content is refused; of one
	// holding protected files it is not (protection is about writes).
	dg := &digester{s: s, ctx: ctx}
	if _, _, err := dg.path("secret"); !errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED}) {
		t.Errorf("digest of a denied tree = %v", err)
	}
	if _, _, err := dg.path(".git"); err != nil {
		t.Errorf("digest of a protected tree = %v", err)
	}
	for p, want := range map[string]string{".git/config": "[core]\n", "secret/key": "hunter2\n", "ok.txt": "x\n"} {
		if got := wcontent(t, filepath.Join(dir, p)); got != want {
			t.Errorf("%s = %q", p, got)
		}
	}
	for _, p := range []string{"git2", "key2", "s2", "c"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists", p)
		}
	}
}

// Hunks are located in the patch's order, each at or after the end of the
// previous one: a context that also occurs before the previous hunk is
// not ambiguous, one that occurs twice in its stretch is, and a hunk that
// matches only before the previous one is refused as out of order.
func TestPatchHunksInOrder(t *testing.T) {
	frags := func(patch string) []*patchFile {
		t.Helper()
		files, err := parsePatch([]byte(patch))
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	data := []byte("a\nx\nb\nx\n")
	two := "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-x\n+X1\n@@ -4 +4 @@\n-x\n+X2\n"
	got, err := hunks.ApplyDiff("f", data, frags(two)[0].frags, false)
	if err != nil || string(got) != "a\nX1\nb\nX2\n" {
		t.Fatalf("two hunks = %q, %v", got, err)
	}
	one := "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-x\n+X\n"
	_, err = hunks.ApplyDiff("f", data, frags(one)[0].frags, false)
	if e := wantWriteCode(t, "one hunk", err, fsmcpv1.ErrorCode_ERROR_CODE_AMBIGUOUS_MATCH); e.Count != 2 {
		t.Errorf("count = %d, want 2", e.Count)
	}
	swapped := "--- a/f\n+++ b/f\n@@ -3,1 +3,1 @@\n-x\n+y\n@@ -1,1 +1,1 @@\n-x\n+y\n"
	got, err = hunks.ApplyDiff("f", []byte("a\nb\nx\n"), frags(swapped)[0].frags, false)
	wantWriteCode(t, fmt.Sprintf("swapped hunks (%q)", got), err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	ins := "--- a/f\n+++ b/f\n@@ -3 +3 @@\n-x\n+y\n@@ -1,0 +2 @@\n+new\n"
	_, err = hunks.ApplyDiff("f", []byte("a\nb\nx\n"), frags(ins)[0].frags, false)
	wantWriteCode(t, "insertion before the previous hunk", err, fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
}
