package worker

import (
	"context"
	"fmt"
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
	s.appendTouch(recs)
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
