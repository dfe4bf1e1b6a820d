package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/patchlog"
)

// mixedPatch replaces sub/a, deletes d and creates sub/n.
func mixedPatch() ([]byte, []*fsmcpv1.PatchPrecondition) {
	patch := "--- a/sub/a\n+++ b/sub/a\n@@ -1 +1 @@\n-old a\n+new a\n" +
		"--- a/d\n+++ /dev/null\n@@ -1 +0,0 @@\n-old d\n" +
		"--- /dev/null\n+++ b/sub/n\n@@ -0,0 +1 @@\n+new n\n"
	return []byte(patch), []*fsmcpv1.PatchPrecondition{
		{Path: []byte("sub/a"), Sha256: wsum([]byte("old a\n"))},
		{Path: []byte("d"), Sha256: wsum([]byte("old d\n"))},
		{Path: []byte("sub/n"), MustNotExist: true},
	}
}

// patchState reads sub/a, d and sub/n ("-" for a missing file).
func patchState(t *testing.T, root string) string {
	t.Helper()
	var parts []string
	for _, n := range []string{"sub/a", "d", "sub/n"} {
		b, err := os.ReadFile(filepath.Join(root, n))
		switch {
		case errors.Is(err, os.ErrNotExist):
			parts = append(parts, "-")
		case err != nil:
			t.Fatal(err)
		default:
			parts = append(parts, strings.TrimSuffix(string(b), "\n"))
		}
	}
	return strings.Join(parts, "|")
}

const (
	patchOld = "old a|old d|-"
	patchNew = "new a|-|new n"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// A patch under --quarantine moves the old version of every file it
// replaces or deletes into the quarantine (the same inodes: nothing is
// copied), and its one token undoes the whole patch: the replaced file
// back, the deleted one back, the created one taken away (into the
// quarantine). The undo's own token redoes the patch, and so on.
func TestPatchQuarantineUndo(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 1<<20)
	wput(t, filepath.Join(root, "sub", "a"), "old a\n")
	wput(t, filepath.Join(root, "d"), "old d\n")
	inoA, inoD := inode(t, filepath.Join(root, "sub", "a")), inode(t, filepath.Join(root, "d"))
	patch, pre := mixedPatch()
	resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: patch, Preconditions: pre})
	if err != nil {
		t.Fatal(err)
	}
	if got := patchState(t, root); got != patchNew {
		t.Fatalf("after the patch: %s, want %s", got, patchNew)
	}
	noHostPathIn(t, resp.GetUndo(), root)
	kept := map[uint64]bool{}
	for _, n := range quarantined(t, qdir) {
		kept[inode(t, filepath.Join(qdir, n))] = true
	}
	if len(kept) != 2 || !kept[inoA] || !kept[inoD] {
		t.Fatalf("the quarantine holds inodes %v, want the old sub/a (%d) and d (%d)", kept, inoA, inoD)
	}
	token := resp.GetUndo()
	for round := range 3 {
		u := undoOf(t, s, token)
		want := patchOld
		if round%2 == 1 {
			want = patchNew
		}
		if got := patchState(t, root); got != want {
			t.Fatalf("undo %d: %s, want %s", round+1, got, want)
		}
		if len(u.GetPaths()) != 3 {
			t.Errorf("undo %d names %q, want the patch's three paths", round+1, u.GetPaths())
		}
		if round == 0 && (inode(t, filepath.Join(root, "sub", "a")) != inoA || inode(t, filepath.Join(root, "d")) != inoD) {
			t.Error("the undo brought back other inodes than the patch displaced")
		}
		_, err := s.Undo(ctx, &fsmcpv1.UndoRequest{Token: token})
		wantWriteCode(t, "replayed token", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
		token = u.GetUndo()
	}
	noTempLeft(t, root)
}

// An undo of a patch never lands over a newer change of any of its
// files: a later change to one file (each in turn: the replaced file
// rewritten, the deleted file's path taken, the created file removed)
// refuses the whole undo with precondition_failed, and none of the files
// moves. Put back as the patch left them, the same token then works.
func TestPatchQuarantineUndoRefusedAfterChange(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name         string
		change, back func(root string) error
	}{
		{"replaced file rewritten", func(root string) error {
			return os.WriteFile(filepath.Join(root, "sub", "a"), []byte("newer a\n"), 0o644)
		}, nil},
		{"deleted path taken", func(root string) error {
			return os.WriteFile(filepath.Join(root, "d"), []byte("newer d\n"), 0o644)
		}, func(root string) error { return os.Remove(filepath.Join(root, "d")) }},
		{"created file moved away", func(root string) error {
			return os.Rename(filepath.Join(root, "sub", "n"), filepath.Join(root, "n2"))
		}, func(root string) error { return os.Rename(filepath.Join(root, "n2"), filepath.Join(root, "sub", "n")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, root, qdir := newQuarantineService(t, 1<<20)
			wput(t, filepath.Join(root, "sub", "a"), "old a\n")
			wput(t, filepath.Join(root, "d"), "old d\n")
			patch, pre := mixedPatch()
			resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: patch, Preconditions: pre})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.change(root); err != nil {
				t.Fatal(err)
			}
			after := patchState(t, root)
			inQ := strings.Join(quarantined(t, qdir), " ")
			_, err = s.Undo(ctx, &fsmcpv1.UndoRequest{Token: resp.GetUndo()})
			wantWriteCode(t, "undo over a newer change", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
			if got := patchState(t, root); got != after {
				t.Errorf("a refused undo changed the files: %s, was %s", got, after)
			}
			if got := strings.Join(quarantined(t, qdir), " "); got != inQ {
				t.Errorf("a refused undo changed the quarantine: %s, was %s", got, inQ)
			}
			if c.back == nil {
				return
			}
			if err := c.back(root); err != nil {
				t.Fatal(err)
			}
			undoOf(t, s, resp.GetUndo())
			if got := patchState(t, root); got != patchOld {
				t.Errorf("undo after the change was put back: %s, want %s", got, patchOld)
			}
		})
	}
}

// --quarantine-bytes counts a patch's kept versions as one entry: past the
// bound the oldest patch goes whole (its token then not_found), and a
// patch whose kept versions alone exceed the bound commits without a
// token and leaves nothing in the quarantine.
func TestPatchQuarantineEviction(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 300)
	change := func(from, to string) (string, error) {
		var patch strings.Builder
		var pre []*fsmcpv1.PatchPrecondition
		for _, n := range []string{"x", "y"} {
			old := strings.Repeat(from, 99) + "\n"
			patch.WriteString("--- a/" + n + "\n+++ b/" + n + "\n@@ -1 +1 @@\n-" + old + "+" + strings.Repeat(to, 99) + "\n")
			pre = append(pre, &fsmcpv1.PatchPrecondition{Path: []byte(n), Sha256: wsum([]byte(old))})
		}
		resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(patch.String()), Preconditions: pre})
		return resp.GetUndo(), err
	}
	wput(t, filepath.Join(root, "x"), strings.Repeat("1", 99)+"\n")
	wput(t, filepath.Join(root, "y"), strings.Repeat("1", 99)+"\n")
	first, err := change("1", "2")
	if err != nil || first == "" {
		t.Fatalf("first patch: %v, undo %q", err, first)
	}
	second, err := change("2", "3")
	if err != nil || second == "" {
		t.Fatalf("second patch: %v, undo %q", err, second)
	}
	if n := len(quarantined(t, qdir)); n != 2 {
		t.Errorf("the quarantine holds %d names, want the second patch's 2 (the first's 200 bytes were evicted)", n)
	}
	_, err = s.Undo(ctx, &fsmcpv1.UndoRequest{Token: first})
	wantWriteCode(t, "undo of an evicted patch", err, fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND)
	undoOf(t, s, second)
	if got := wcontent(t, filepath.Join(root, "x")) + wcontent(t, filepath.Join(root, "y")); got != strings.Repeat(strings.Repeat("2", 99)+"\n", 2) {
		t.Errorf("after the undo: %q", got)
	}
	// 2 × 400 bytes of old versions exceed the bound of 300.
	s, root, qdir = newQuarantineService(t, 300)
	wput(t, filepath.Join(root, "x"), strings.Repeat("1", 399)+"\n")
	wput(t, filepath.Join(root, "y"), strings.Repeat("1", 399)+"\n")
	var patch strings.Builder
	var pre []*fsmcpv1.PatchPrecondition
	for _, n := range []string{"x", "y"} {
		old := strings.Repeat("1", 399) + "\n"
		patch.WriteString("--- a/" + n + "\n+++ b/" + n + "\n@@ -1 +1 @@\n-" + old + "+small\n")
		pre = append(pre, &fsmcpv1.PatchPrecondition{Path: []byte(n), Sha256: wsum([]byte(old))})
	}
	resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(patch.String()), Preconditions: pre})
	if err != nil || resp.GetUndo() != "" {
		t.Errorf("a patch past the bound: %v, undo %q", err, resp.GetUndo())
	}
	if got := wcontent(t, filepath.Join(root, "x")); got != "small\n" {
		t.Errorf("x = %q", got)
	}
	if n := quarantined(t, qdir); len(n) != 0 {
		t.Errorf("the quarantine holds %v, want nothing", n)
	}
	noTempLeft(t, root)
}

// recoverJournals undoes a patch interrupted at any point of a commit with a
// quarantine: with every number of files placed, and once all are placed,
// with every number of old versions already renamed into the quarantine.
// Every file comes back with its old content, nothing of the patch stays
// in the root or the quarantine. A worker started without the quarantine
// the journal names refuses to undo it and leaves the journal.
func TestPatchQuarantineRecover(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ placed, kept int }{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {3, 1}, {3, 2}, {3, 3}} {
		s, root, qdir := newQuarantineService(t, 1<<20)
		wput(t, filepath.Join(root, "sub", "a"), "old a\n")
		wput(t, filepath.Join(root, "d"), "old d\n")
		patch, pre := mixedPatch()
		files, err := parsePatch(patch)
		if err != nil {
			t.Fatal(err)
		}
		if err := matchPreconditions(files, pre, false); err != nil {
			t.Fatal(err)
		}
		// Stage, journal, place and keep by hand, as commitAll does, and
		// stop: this is what a crash leaves.
		q := s.quarantine
		j := &patchlog.Journal{RootDev: s.rootDev, RootIno: s.rootIno, QDev: q.dev, QIno: q.ino}
		stageByHand(t, s, files)
		for _, f := range files {
			e := f.entry()
			if !f.create {
				f.qname = q.newName()
				e.Q = []byte(f.qname)
			}
			j.Entries = append(j.Entries, e)
		}
		if _, err := patchlog.Write(int(s.state.Fd()), j); err != nil {
			t.Fatal(err)
		}
		for _, f := range files[:c.placed] {
			if f.delete {
				err = s.placeDeletion(f)
			} else {
				_, err = s.place(ctx, f.st, f.base, f.path, f.cur)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		kept := 0
		for _, f := range files {
			if f.qname != "" && kept < c.kept {
				if err := fileio.RenameNoReplace(f.d.fd, f.tmp, q.fd, f.qname); err != nil {
					t.Fatal(err)
				}
				kept++
			}
		}
		if c.placed == 3 && c.kept == 2 {
			// Started with another quarantine: refused, journal kept.
			other := quarantineServiceOver(t, root, t.TempDir(), 1<<20)
			if _, err := other.recoverJournals(""); !errors.Is(err, errJournalQuarantine) || !strings.Contains(err.Error(), "--discard-journal") {
				t.Fatalf("Recover with another quarantine = %v, want errJournalQuarantine naming --discard-journal", err)
			}
			if js, _ := s.journals(); len(js) != 1 {
				t.Fatalf("journals after the refusal: %v", js)
			}
		}
		// The restart's own quarantine counts what is there, then
		// recovery takes the kept versions back.
		s2 := quarantineServiceOver(t, root, qdir, 1<<20)
		if r, err := s2.recoverJournals(""); err != nil || r.Undone != 1 {
			t.Fatalf("%+v: Recover() = %+v, %v", c, r, err)
		}
		if got := patchState(t, root); got != patchOld {
			t.Errorf("%+v: after recovery %s, want %s", c, got, patchOld)
		}
		if n := quarantined(t, qdir); len(n) != 0 {
			t.Errorf("%+v: the quarantine holds %v after recovery", c, n)
		}
		if len(s2.quarantine.entries) != 0 || s2.quarantine.total != 0 {
			t.Errorf("%+v: the quarantine still counts %d entries, %d bytes", c, len(s2.quarantine.entries), s2.quarantine.total)
		}
		entries, _ := os.ReadDir(root)
		if len(entries) != 2 { // sub and d
			t.Errorf("%+v: left behind after recovery: %v", c, entries)
		}
		noTempLeft(t, root)
	}
}
