package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/checkpoint"
)

// checkpointService is a Service over root with a quarantine and a state
// directory of its own.
func checkpointService(b *testing.B, root string) *Service {
	b.Helper()
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	qdir := b.TempDir()
	qf, err := os.Open(qdir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { qf.Close() })
	q, err := OpenQuarantine(qf, 1<<40)
	if err != nil {
		b.Fatal(err)
	}
	state, err := os.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { state.Close() })
	s, err := New(r, Options{Quarantine: q, State: state})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCheckpointGoSource takes a checkpoint of $(go env GOROOT)/src
// with a warm hash cache, alternating with fs_digest of the same tree,
// and reports checkpoint/digest, the ratio of their times (target at most
// 1.5): a checkpoint is the digest's walk plus writing its record.
func BenchmarkCheckpointGoSource(b *testing.B) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skip("no go command")
	}
	s := checkpointService(b, filepath.Join(strings.TrimSpace(string(out)), "src"))
	ctx := context.Background()
	digest := func() {
		if _, _, err := (&digester{s: s, ctx: ctx}).path("."); err != nil {
			b.Fatal(err)
		}
	}
	digest() // warms the hash cache
	var dig, cp time.Duration
	var files int64
	for b.Loop() {
		t0 := time.Now()
		digest()
		dig += time.Since(t0)
		t0 = time.Now()
		resp, err := s.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{})
		cp += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		files = resp.GetCheckpoint().GetFiles()
		checkpoint.Remove(int(s.state.Fd()), resp.GetCheckpoint().GetId())
	}
	b.ReportMetric(float64(cp)/float64(dig), "checkpoint/digest")
	b.ReportMetric(float64(files), "files")
}

// BenchmarkRewindHundredFiles changes 100 files of 4 KiB with one fs_patch
// and rewinds them to a checkpoint taken before, in turn, and reports
// rewind/patch, the ratio of their times (target at most 2): both commit
// through the same journal; the rewind also walks the tree twice (its
// comparison and the checkpoint it takes first) and reads the kept
// versions back.
func BenchmarkRewindHundredFiles(b *testing.B) {
	root := b.TempDir()
	s := checkpointService(b, root)
	ctx := context.Background()
	var patch strings.Builder
	var pre []*fsmcpv1.PatchPrecondition
	for i := range 100 {
		name := fmt.Sprintf("d%d/f%03d.txt", i%10, i)
		var old strings.Builder
		for n := 0; old.Len() < 4096; n++ {
			fmt.Fprintf(&old, "%s line %04d\n", name, n)
		}
		wput(b, filepath.Join(root, name), old.String())
		fmt.Fprintf(&patch, "--- a/%s\n+++ b/%s\n@@ -1 +1 @@\n-%s line 0000\n+%s LINE 0000\n", name, name, name, name)
		pre = append(pre, &fsmcpv1.PatchPrecondition{Path: []byte(name), Sha256: wsum([]byte(old.String()))})
	}
	cp, err := s.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{})
	if err != nil {
		b.Fatal(err)
	}
	var patched, rewound time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(patch.String()), Preconditions: pre}); err != nil {
			b.Fatal(err)
		}
		patched += time.Since(t0)
		t0 = time.Now()
		resp, err := s.Rewind(ctx, &fsmcpv1.RewindRequest{Id: cp.GetCheckpoint().GetId()})
		rewound += time.Since(t0)
		if err != nil || len(resp.GetConflicts()) > 0 || len(resp.GetChanges()) != 100 {
			b.Fatalf("rewind: %v, %d changes, conflicts %v", err, len(resp.GetChanges()), resp.GetConflicts())
		}
	}
	b.ReportMetric(float64(rewound)/float64(patched), "rewind/patch")
}
