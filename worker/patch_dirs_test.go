package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/patchlog"
)

// dirsBefore is a tree whose patch (dirsPatch) creates files in missing
// directories (new/deep/x, new/y), deletes every file of gone/ (and so
// gone/sub/ and gone/), one of two in half/, and changes top.
var dirsBefore = map[string]string{
	"gone/sub/a": "a\n",
	"gone/b":     "b\n",
	"half/c":     "c\n",
	"half/d":     "d\n",
	"top":        "old\n",
}

const dirsPatch = "--- /dev/null\n+++ b/new/deep/x\n@@ -0,0 +1 @@\n+x\n" +
	"--- /dev/null\n+++ b/new/y\n@@ -0,0 +1 @@\n+y\n" +
	"--- a/gone/sub/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n" +
	"--- a/gone/b\n+++ /dev/null\n@@ -1 +0,0 @@\n-b\n" +
	"--- a/half/c\n+++ /dev/null\n@@ -1 +0,0 @@\n-c\n" +
	"--- a/top\n+++ b/top\n@@ -1 +1 @@\n-old\n+new\n"

func dirsPre() []*fsmcpv1.PatchPrecondition {
	pre := []*fsmcpv1.PatchPrecondition{
		{Path: []byte("new/deep/x"), MustNotExist: true},
		{Path: []byte("new/y"), MustNotExist: true},
	}
	for _, n := range []string{"gone/sub/a", "gone/b", "half/c", "top"} {
		pre = append(pre, &fsmcpv1.PatchPrecondition{Path: []byte(n), Sha256: wsum([]byte(dirsBefore[n]))})
	}
	return pre
}

func dirsTree(t *testing.T, root string) {
	t.Helper()
	for n, c := range dirsBefore {
		wput(t, filepath.Join(root, n), c)
	}
	// gone/sub has its own mode, which must come back with it.
	if err := os.Chmod(filepath.Join(root, "gone", "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
}

// wantDirsApplied checks the tree as git apply leaves it: new/ and
// new/deep/ made, gone/ removed whole, half/ kept with d.
func wantDirsApplied(t *testing.T, root string) {
	t.Helper()
	want := []string{".", "half/", "half/d " + wsum([]byte("d\n")), "new/", "new/deep/", "new/deep/x " + wsum([]byte("x\n")),
		"new/y " + wsum([]byte("y\n")), "top " + wsum([]byte("new\n"))}
	if got := treeHashes(t, root); got != "[./ "+strings.Join(want[1:], " ")+"]" {
		t.Errorf("after the patch:\n got %s\nwant %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(root, "new", "deep")); err != nil || fi.Mode().Perm() != newDirMode {
		t.Errorf("new/deep: %v %v, want mode %o", fi, err, newDirMode)
	}
	noTempLeft(t, root)
}

func wantDirsBefore(t *testing.T, root, before string) {
	t.Helper()
	if got := treeHashes(t, root); got != before {
		t.Errorf("not as before:\n got %s\nwant %s", got, before)
	}
	if fi, err := os.Stat(filepath.Join(root, "gone", "sub")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("gone/sub: %v %v, want mode 777", fi, err)
	}
	noTempLeft(t, root)
}

// fs_patch makes the missing directories of the files it creates and
// removes the ones its deletions leave empty, as git apply does; a dry
// run does neither.
func TestPatchDirectories(t *testing.T) {
	s, root := newWriteService(t)
	dirsTree(t, root)
	before := treeHashes(t, root)
	ctx := context.Background()
	resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(dirsPatch), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetFiles()) != 6 {
		t.Fatalf("dry run: %v", resp)
	}
	wantDirsBefore(t, root, before)
	if _, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(dirsPatch), Preconditions: dirsPre()}); err != nil {
		t.Fatal(err)
	}
	wantDirsApplied(t, root)
}

// A patch that fails once its commit has begun (a file it replaces
// changed behind the worker's back) takes away the directories it made
// and brings back what it deleted, whichever file fails.
func TestPatchDirectoriesUndoneOnFailure(t *testing.T) {
	s, root := newWriteService(t)
	dirsTree(t, root)
	before := treeHashes(t, root)
	s.beforeCommit = func(p string) {
		if p == "top" {
			wput(t, filepath.Join(root, "intruder"), "old\n")
			if err := os.Rename(filepath.Join(root, "intruder"), filepath.Join(root, "top")); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(dirsPatch), Preconditions: dirsPre()})
	wantWriteCode(t, "Patch", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	wantDirsBefore(t, root, before)
}

// Recovery undoes a patch whose commit got as far as it goes before the
// journal's removal (files placed, old versions in the quarantine,
// directories made and removed): the removed directories come back with
// their modes, the made ones go.
func TestPatchDirectoriesRecovered(t *testing.T) {
	s, root, qdir := newQuarantineService(t, 1<<20)
	dirsTree(t, root)
	before := treeHashes(t, root)
	var saved []byte
	var savedName string
	s.beforeCommit = func(string) {
		names, _ := s.journals()
		if len(names) == 1 && saved == nil {
			savedName = names[0]
			saved, _ = os.ReadFile(filepath.Join(s.state.Name(), savedName))
		}
	}
	if _, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(dirsPatch), Preconditions: dirsPre()}); err != nil {
		t.Fatal(err)
	}
	wantDirsApplied(t, root)
	var j patchlog.Journal
	_, body, _ := bytes.Cut(saved, []byte("\n"))
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range j.Entries {
		kinds[e.Kind]++
	}
	if kinds["mkdir"] != 2 || kinds["rmdir"] != 2 {
		t.Fatalf("the journal's entries: %v", kinds)
	}
	// The journal as the crash would have left it.
	if err := os.WriteFile(filepath.Join(s.state.Name(), savedName), saved, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := quarantineServiceOver(t, root, qdir, 1<<20)
	if r, err := s2.recoverJournals(""); err != nil || r.Undone != 1 || len(r.SetAside) != 0 {
		t.Fatalf("Recover() = %+v, %v", r, err)
	}
	wantDirsBefore(t, root, before)
}

// Directories are judged like files: a protected or denied directory the
// patch would make, or a protected one it would remove because it leaves
// it empty, refuses the whole patch, and nothing changes. (The policy
// covers everything beneath a directory it names, so the file the patch
// creates or deletes in it is protected or denied too.)
func TestPatchDirectoriesFollowThePolicy(t *testing.T) {
	for name, pol := range map[string]sandbox.Policy{
		"protect new/deep": {Protect: []string{"new/deep"}},
		"deny new":         {Deny: []string{"new"}},
		"protect gone":     {Protect: []string{"gone"}},
	} {
		t.Run(name, func(t *testing.T) {
			s, root := newServiceIn(t, Options{Policy: pol})
			dirsTree(t, root)
			before := treeHashes(t, root)
			_, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(dirsPatch), Preconditions: dirsPre()})
			wantWriteCode(t, "Patch", err, fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
			wantDirsBefore(t, root, before)
		})
	}
}

// The undo token of a patch that removed directories makes them again
// (with the mode of a new directory: their own is not kept) and brings
// every file back; the directories the patch made stay, emptied. One
// that only made directories takes its files away and leaves the
// directories.
func TestPatchDirectoriesUndoToken(t *testing.T) {
	s, root, _ := newQuarantineService(t, 1<<20)
	dirsTree(t, root)
	ctx := context.Background()
	resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(dirsPatch), Preconditions: dirsPre()})
	if err != nil || resp.GetUndo() == "" {
		t.Fatalf("Patch = %v, %v", resp, err)
	}
	if _, err := s.Undo(ctx, &fsmcpv1.UndoRequest{Token: resp.GetUndo()}); err != nil {
		t.Fatal(err)
	}
	for n, c := range dirsBefore {
		if got := wcontent(t, filepath.Join(root, n)); got != c {
			t.Errorf("after the undo %s holds %q, want %q", n, got, c)
		}
	}
	for _, n := range []string{"new/deep/x", "new/y"} {
		if _, err := os.Lstat(filepath.Join(root, n)); !os.IsNotExist(err) {
			t.Errorf("after the undo %s: %v, want it gone", n, err)
		}
	}
	prior := treeHashes(t, root)
	create := "--- /dev/null\n+++ b/more/m\n@@ -0,0 +1 @@\n+m\n"
	resp, err = s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(create),
		Preconditions: []*fsmcpv1.PatchPrecondition{{Path: []byte("more/m"), MustNotExist: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Undo(ctx, &fsmcpv1.UndoRequest{Token: resp.GetUndo()}); err != nil {
		t.Fatal(err)
	}
	if got, want := treeHashes(t, root), strings.Replace(prior, " new/", " more/ new/", 1); got != want {
		t.Errorf("after the undo:\n got %s\nwant %s", got, want)
	}
}
