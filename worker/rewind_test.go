package worker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/checkpoint"
)

// A commit records in the touch log what it leaves before its journal is
// removed; a crash in between leaves a journal, whose recovery records
// the old state again. So a rewind after that recovery sees the files as
// the tools left them, not as a conflict.
func TestRewindAfterRecovery(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 1<<20)
	for _, n := range []string{"a", "b", "c", "w-copy"} {
		wput(t, filepath.Join(root, n), "w\n")
	}
	cp, err := s.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The tools wrote "x" into a, b and c (recorded by hand here), then
	// a patch to "y" was cut short after its touch records.
	j, files := interruptedPatch(t, s, root)
	var recs []checkpoint.Touch
	for _, n := range []string{"a", "b", "c"} {
		recs = append(recs, checkpoint.Touch{Path: []byte(n), Type: checkpoint.File, SHA: wsum([]byte("x\n")), Time: time.Now().UnixNano()})
	}
	s.cps.Touch(recs)
	s.touchCommit(files, nil, nil)
	sealJournal(t, s, j)

	again := quarantineServiceOver(t, root, qdir, 1<<20)
	if r, err := again.recoverJournals(""); err != nil || r.Undone != 1 {
		t.Fatalf("Recover = %+v, %v; want the patch undone", r, err)
	}
	resp, err := again.Rewind(ctx, &fsmcpv1.RewindRequest{Id: cp.GetCheckpoint().GetId(), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetConflicts()) > 0 || len(resp.GetChanges()) != 3 {
		t.Fatalf("after recovery: %d changes, conflicts %v; want 3 changes and no conflict", len(resp.GetChanges()), resp.GetConflicts())
	}
}

// Writes served concurrently with checkpoints each leave their record in
// the touch log (through the interceptor), so a rewind afterwards sees
// every change as the tools' own and brings every file back.
func TestRewindConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	s, root, _ := newQuarantineService(t, 1<<30)
	for i := range 4 {
		wput(t, filepath.Join(root, fmt.Sprintf("f%d", i)), "v0\n")
	}
	c := serveInProcess(t, s)
	first, err := c.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{Label: "first"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("f%d", i)
			prev := "v0\n"
			for n := 1; n <= 10; n++ {
				next := fmt.Sprintf("v%d\n", n)
				if _, err := c.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte(name), Content: []byte(next), IfSha256: wsum([]byte(prev))}); err != nil {
					t.Error(err)
					return
				}
				prev = next
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			if _, err := c.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{}); err != nil {
				t.Error(err)
			}
			if _, err := c.Checkpoints(ctx, &fsmcpv1.CheckpointsRequest{}); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	resp, err := c.Rewind(ctx, &fsmcpv1.RewindRequest{Id: first.GetCheckpoint().GetId()})
	if err != nil || len(resp.GetConflicts()) > 0 {
		t.Fatalf("rewind: %v, conflicts %v", err, resp.GetConflicts())
	}
	for i := range 4 {
		if got := wcontent(t, filepath.Join(root, fmt.Sprintf("f%d", i))); got != "v0\n" {
			t.Errorf("f%d = %q after the rewind", i, got)
		}
	}
}

// A file appended to in place since the checkpoint is cut back to it in
// place (the same inode), the cut bytes kept: the rewind's undo token
// appends them again, and that undo's token cuts them once more. A crash
// after the cut but before the commit's end puts them back at the next
// start.
func TestRewindAcrossAppend(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 1<<20)
	p := filepath.Join(root, "log")
	wput(t, p, "one\n")
	ino, _ := inoOf(t, p)
	appendTwo := func(s *Service) {
		t.Helper()
		if _, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("log"), Content: []byte("two\n"), Append: true, IfSha256: wsum([]byte("one\n"))}); err != nil {
			t.Fatal(err)
		}
		// As the touch interceptor records it.
		s.cps.Touch([]checkpoint.Touch{{Path: []byte("log"), Type: checkpoint.File, SHA: wsum([]byte("one\ntwo\n")), Time: time.Now().UnixNano()}})
	}
	want := func(content string) {
		t.Helper()
		if got := wcontent(t, p); got != content {
			t.Fatalf("log = %q, want %q", got, content)
		}
		if now, _ := inoOf(t, p); now != ino {
			t.Fatal("the log is another inode")
		}
	}
	cp, err := s.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := cp.GetCheckpoint().GetId()
	appendTwo(s)
	resp, err := s.Rewind(ctx, &fsmcpv1.RewindRequest{Id: id})
	if err != nil || len(resp.GetConflicts()) > 0 {
		t.Fatalf("Rewind = %v, %v", resp, err)
	}
	want("one\n")
	redo := undoOf(t, s, resp.GetUndo())
	want("one\ntwo\n")
	undoOf(t, s, redo.GetUndo())
	want("one\n")

	appendTwo(s)
	var saved []byte
	var savedName string
	s.beforeCommit = func(string) {
		names, _ := s.journals()
		savedName = names[0]
		saved, _ = os.ReadFile(filepath.Join(s.state.Name(), savedName))
	}
	if _, err := s.Rewind(ctx, &fsmcpv1.RewindRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	want("one\n")
	if !bytes.Contains(saved, []byte(`"kind":"cut"`)) {
		t.Fatalf("the rewind's journal has no cut entry: %s", saved)
	}
	// The journal as a crash before its removal would have left it.
	if err := os.WriteFile(filepath.Join(s.state.Name(), savedName), saved, 0o600); err != nil {
		t.Fatal(err)
	}
	again := quarantineServiceOver(t, root, qdir, 1<<20)
	if r, err := again.recoverJournals(""); err != nil || r.Undone != 1 || len(r.SetAside) != 0 {
		t.Fatalf("recoverJournals = %+v, %v", r, err)
	}
	want("one\ntwo\n")
}
