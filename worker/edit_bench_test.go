package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// BenchmarkEditAppend appends 1 KiB to a 64 MiB file through the worker's
// Write (append in place: the precondition, the new sha256, the journal
// slot's pwrite and fdatasync, the write and its fdatasync) and, in the
// same run, the same append to a 4 KiB file through Write, and with
// O_APPEND in this process (write and fsync), one of each in turn. The
// files are written and fsynced first. The first append, which hashes the
// whole file once (as the fs_stat that gave the client its if_sha256
// would have), is timed apart as first-append-µs; from then on the hash
// cache holds each new version's sum and digest state, so the
// precondition reads nothing and the new sha256 hashes only the 1 KiB
// (hashed-B/op counts what is read for hashing). ratio is the steady
// 64 MiB append over O_APPEND+fsync (target at most 3), size-ratio over
// the 4 KiB append (target at most 1.5).
func BenchmarkEditAppend(b *testing.B) {
	s, dir := newBenchService(b)
	p := filepath.Join(dir, "big")
	base := filepath.Join(dir, "base")
	chunk := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
	if err := os.WriteFile(filepath.Join(dir, "small"), chunk[:4096], 0o644); err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{p, base} {
		fd, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		for range 1024 {
			fd.Write(chunk)
		}
		if err := fd.Sync(); err != nil {
			b.Fatal(err)
		}
		fd.Close()
	}
	line := []byte(strings.Repeat("x", 1023) + "\n")
	sums := map[string]string{"big": fileSHA(b, p), "small": fileSHA(b, filepath.Join(dir, "small"))}
	ctx := context.Background()
	appendOnce := func(name string) time.Duration {
		t0 := time.Now()
		resp, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte(name), Content: line, IfSha256: sums[name], Append: true})
		if err != nil {
			b.Fatal(err)
		}
		sums[name] = resp.GetSha256()
		return time.Since(t0)
	}
	first := appendOnce("big")
	appendOnce("small")
	var ours, small, theirs time.Duration
	hashed := s.hashes.Hashed.Load()
	for b.Loop() {
		ours += appendOnce("big")
		small += appendOnce("small")
		// The small file stays 4 KiB: cut back, untimed.
		if err := os.Truncate(filepath.Join(dir, "small"), 4096); err != nil {
			b.Fatal(err)
		}
		sums["small"] = fileSHA(b, filepath.Join(dir, "small"))
		t0 := time.Now()
		f, err := os.OpenFile(base, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		f.Write(line)
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		theirs += time.Since(t0)
	}
	if got := fileSHA(b, p); got != sums["big"] {
		b.Fatalf("the file's sha256 is %s, the last reply said %s", got, sums["big"])
	}
	n := float64(b.N)
	b.ReportMetric(float64(first.Microseconds()), "first-append-µs")
	b.ReportMetric(float64(ours.Microseconds())/n, "append-µs")
	b.ReportMetric(float64(theirs.Microseconds())/n, "oappend-fsync-µs")
	b.ReportMetric(float64(small.Microseconds())/n, "append-4k-µs")
	b.ReportMetric(float64(ours)/float64(theirs), "ratio")
	b.ReportMetric(float64(ours)/float64(small), "size-ratio")
	b.ReportMetric(float64(s.hashes.Hashed.Load()-hashed)/n, "hashed-B/op")
}

// BenchmarkEditPatchVsReplace compares, in worker time, one Patch of 20
// files of 100 KiB with 3 hunks each against 20 sequential Replace calls
// making the same three edits to each file.
func BenchmarkEditPatchVsReplace(b *testing.B) {
	s, dir := newBenchService(b)
	const files = 20
	var patch strings.Builder
	var pre []*fsmcpv1.PatchPrecondition
	contents := map[string][2]string{}
	for i := range files {
		name := fmt.Sprintf("f%02d.txt", i)
		var lines []string
		for n := 0; len(strings.Join(lines, "")) < 100<<10; n++ {
			lines = append(lines, fmt.Sprintf("%s line %06d of the benchmark file\n", name, n))
		}
		old := strings.Join(lines, "")
		for _, at := range []int{10, len(lines) / 2, len(lines) - 10} {
			lines[at] = "EDITED " + lines[at]
		}
		nw := strings.Join(lines, "")
		contents[name] = [2]string{old, nw}
		os.WriteFile(filepath.Join(dir, name), []byte(old), 0o644)
		os.WriteFile(filepath.Join(dir, "new-"+name), []byte(nw), 0o644)
		out, _ := exec.Command("diff", "-u", filepath.Join(dir, name), filepath.Join(dir, "new-"+name)).Output()
		os.Remove(filepath.Join(dir, "new-"+name))
		d := string(out)
		d = strings.Replace(d, "--- "+filepath.Join(dir, name), "--- a/"+name, 1)
		d = strings.Replace(d, "+++ "+filepath.Join(dir, "new-"+name), "+++ b/"+name, 1)
		patch.WriteString(d)
		pre = append(pre, &fsmcpv1.PatchPrecondition{Path: []byte(name), Sha256: wsum([]byte(old))})
	}
	ctx := context.Background()
	var patchT, replaceT time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(patch.String()), Preconditions: pre}); err != nil {
			b.Fatal(err)
		}
		patchT += time.Since(t0)
		// Back to the old content, outside the timing.
		for name, c := range contents {
			os.WriteFile(filepath.Join(dir, name), []byte(c[0]), 0o644)
		}
		t0 = time.Now()
		for name, c := range contents {
			oldLines, newLines := strings.SplitAfter(c[0], "\n"), strings.SplitAfter(c[1], "\n")
			var edits []*fsmcpv1.Edit
			for k := range oldLines {
				if oldLines[k] != newLines[k] {
					edits = append(edits, &fsmcpv1.Edit{Old: []byte(oldLines[k]), New: []byte(newLines[k])})
				}
			}
			if _, err := s.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: []byte(name), Edits: edits, IfSha256: wsum([]byte(c[0]))}); err != nil {
				b.Fatal(err)
			}
		}
		replaceT += time.Since(t0)
		for name, c := range contents {
			os.WriteFile(filepath.Join(dir, name), []byte(c[0]), 0o644)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(patchT.Microseconds())/n, "patch-µs")
	b.ReportMetric(float64(replaceT.Microseconds())/n, "20-replaces-µs")
	b.ReportMetric(float64(patchT)/float64(replaceT), "ratio")
}

// BenchmarkEditDigestGoTree digests $GOROOT/src in the worker with an
// empty hash cache (cold) and again with it filled (warm), against `find
// -type f | xargs sha256sum` in the same run. The page cache is warm for
// all three (the tree is read once first): dropping it would disturb the
// whole machine.
func BenchmarkEditDigestGoTree(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(src); err != nil {
		b.Skip("no Go tree: ", err)
	}
	root, err := os.OpenRoot(src)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	shell := func() time.Duration {
		t0 := time.Now()
		cmd := exec.Command("sh", "-c", "find . -type f -print0 | xargs -0 sha256sum > /dev/null")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("sha256sum: %v\n%s", err, out)
		}
		return time.Since(t0)
	}
	shell() // the page cache
	ctx := context.Background()
	var cold, warm, sums time.Duration
	for b.Loop() {
		s, err := New(root, Options{})
		if err != nil {
			b.Fatal(err)
		}
		dg := &digester{s: s, ctx: ctx}
		t0 := time.Now()
		if _, _, err := dg.path("."); err != nil {
			b.Fatal(err)
		}
		cold += time.Since(t0)
		dg = &digester{s: s, ctx: ctx}
		t0 = time.Now()
		if _, _, err := dg.path("."); err != nil {
			b.Fatal(err)
		}
		warm += time.Since(t0)
		sums += shell()
	}
	n := float64(b.N)
	b.ReportMetric(float64(cold.Milliseconds())/n, "digest-cold-ms")
	b.ReportMetric(float64(warm.Milliseconds())/n, "digest-warm-ms")
	b.ReportMetric(float64(sums.Milliseconds())/n, "sha256sum-ms")
	b.ReportMetric(float64(cold)/float64(sums), "cold-ratio")
	b.ReportMetric(float64(warm)/float64(sums), "warm-ratio")
}

func newBenchService(b *testing.B) (*Service, string) {
	dir := filepath.Join(b.TempDir(), "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { root.Close() })
	s, err := New(root, Options{State: stateFor(b, dir)})
	if err != nil {
		b.Fatal(err)
	}
	return s, dir
}

func fileSHA(b *testing.B, p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	return wsum(data)
}
