package paging

import (
	"bytes"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/proto/jsontext"
)

// BenchmarkGlobPageTail times what fs_glob does with its page after rg's
// last path, which no overlap with rg can hide: the sort (pages are in
// byte order, so the first page is known only once every path is), the
// escape of the page into JSON objects, and the front-end's check of
// them. The paths are `rg --files -g '**/*.go'` of the Go tree, the page
// bound holds them all, as in scripts/bench --raw --search.
func BenchmarkGlobPageTail(b *testing.B) {
	cmd := exec.Command("rg", "--files", "--null", "-g", "**/*.go")
	cmd.Dir = runtime.GOROOT() + "/src"
	out, err := cmd.Output()
	if err != nil {
		b.Skipf("rg over the Go tree: %v", err)
	}
	names := bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0})
	var sorting, escaping, checking time.Duration
	for b.Loop() {
		page := NewPaths(nil, false, Budget(1<<20))
		for _, n := range names {
			page.Add(n)
		}
		t0 := time.Now()
		paths, more := page.Result()
		t1 := time.Now()
		text, ends := Objects(paths)
		t2 := time.Now()
		if _, ok := jsontext.TextObjects(text, ends, "path", nil); !ok || more || len(paths) != len(names) {
			b.Fatalf("%d of %d paths, more %v, check %v", len(paths), len(names), more, ok)
		}
		checking += time.Since(t2)
		sorting += t1.Sub(t0)
		escaping += t2.Sub(t1)
	}
	n := float64(b.N) * 1e3
	b.ReportMetric(float64(len(names)), "paths")
	b.ReportMetric(float64(sorting.Nanoseconds())/n, "sort-µs/op")
	b.ReportMetric(float64(escaping.Nanoseconds())/n, "escape-µs/op")
	b.ReportMetric(float64(checking.Nanoseconds())/n, "check-µs/op")
}
