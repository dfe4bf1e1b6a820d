package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/hunks"
)

// hunkPatch returns a file of lines lines and a -U0 patch changing every
// other line of it, one hunk per changed line (lines/2 hunks).
func hunkPatch(name string, lines int) (old, patch []byte) {
	var f, p strings.Builder
	fmt.Fprintf(&p, "--- a/%s\n+++ b/%s\n", name, name)
	for i := range lines {
		fmt.Fprintf(&f, "line %07d of the file\n", i)
		if i%2 == 0 {
			fmt.Fprintf(&p, "@@ -%d +%d @@\n-line %07d of the file\n+LINE %07d of the file\n", i+1, i+1, i, i)
		}
	}
	return []byte(f.String()), []byte(p.String())
}

// BenchmarkPatchHunks applies, through the worker's Patch, a patch of
// 6,000 one-line hunks to a 12,000-line file and one of 60,000 hunks of
// the same shape to a 120,000-line file, one of each in turn, and reports
// the ratio of the large to the small: hunks are located in order, each
// search starting after the previous hunk, so the ratio follows the sizes
// (10) rather than their squares (100). apply-ratio is the same for the
// parsing and the application alone, in memory (no read, staging or
// fsync), which a loaded machine disturbs less.
func BenchmarkPatchHunks(b *testing.B) {
	s, dir := newBenchService(b)
	ctx := context.Background()
	type job struct {
		name       string
		old, patch []byte
	}
	jobs := []job{{name: "small"}, {name: "large"}}
	for i, lines := range []int{12000, 120000} {
		jobs[i].old, jobs[i].patch = hunkPatch(jobs[i].name, lines)
	}
	var took, applied [2]time.Duration
	for b.Loop() {
		for i, j := range jobs {
			t0 := time.Now()
			files, err := parsePatch(j.patch)
			if err == nil {
				_, err = hunks.ApplyDiff(j.name, j.old, files[0].frags, false)
			}
			applied[i] += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
		}
		for i, j := range jobs {
			p := filepath.Join(dir, j.name)
			if err := os.WriteFile(p, j.old, 0o644); err != nil {
				b.Fatal(err)
			}
			pre := []*fsmcpv1.PatchPrecondition{{Path: []byte(j.name), Sha256: wsum(j.old)}}
			t0 := time.Now()
			resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: j.patch, Preconditions: pre})
			took[i] += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if got := resp.GetFiles()[0].GetHunks(); got != int64(len(j.old)/len("line 0000000 of the file\n")/2) {
				b.Fatalf("%s: %d hunks applied", j.name, got)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Milliseconds())/n, "6k-hunks-ms")
	b.ReportMetric(float64(took[1].Milliseconds())/n, "60k-hunks-ms")
	b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
	b.ReportMetric(float64(applied[0].Milliseconds())/n, "6k-apply-ms")
	b.ReportMetric(float64(applied[1].Milliseconds())/n, "60k-apply-ms")
	b.ReportMetric(float64(applied[1])/float64(applied[0]), "apply-ratio")
}
