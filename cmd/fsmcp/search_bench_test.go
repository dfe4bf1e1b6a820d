package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The search benchmarks compare fs_grep and fs_glob, called through the
// whole server (MCP client, front-end, gRPC, worker, confined rg, parsing,
// sorting, the reply), with rg itself run on the same tree in the same
// loop, and report both medians and their ratio. The tree is
// $FSMCP_BENCH_TREE, or a copy of $(go env GOROOT)/src.
//
//	go test -run '^$' -bench 'Search' -benchtime 20x ./cmd/fsmcp
//
// scripts/bench-search runs them.

// searchBenchTree returns the tree to search.
func searchBenchTree(b *testing.B) string {
	b.Helper()
	if dir := os.Getenv("FSMCP_BENCH_TREE"); dir != "" {
		return dir
	}
	src := filepath.Join(runtime.GOROOT(), "src")
	dst := filepath.Join(b.TempDir(), "src")
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		b.Fatalf("copy %s: %v\n%s", src, err, out)
	}
	return dst
}

// searchBenchServer starts fsmcp on root with a reply bound large enough for a
// whole result, so both sides produce everything.
func searchBenchServer(b *testing.B, root string) *mcp.ClientSession {
	b.Helper()
	cmd := fsmcpCommand(root, append([]string{"--read-only"}, strings.Fields(os.Getenv("FSMCP_BENCH_FLAGS"))...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-bench", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		b.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	b.Cleanup(func() { session.Close() })
	return session
}

// timedCall times one tool call and checks that it succeeded, untruncated.
func timedCall(b *testing.B, session *mcp.ClientSession, name string, args map[string]any) (time.Duration, string) {
	b.Helper()
	begin := time.Now()
	res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	d := time.Since(begin)
	if err != nil {
		b.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		b.Fatalf("%s(%v) = %.300s", name, args, text)
	}
	return d, text
}

// timedRaw times rg itself in dir, reading all of its output, as the worker
// reads it.
func timedRaw(b *testing.B, dir string, args ...string) time.Duration {
	b.Helper()
	begin := time.Now()
	cmd := exec.Command(rgPath(b), args...)
	cmd.Dir = dir
	cmd.Env = []string{}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, out); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			b.Fatal(err)
		}
	}
	return time.Since(begin)
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// confinedRG times rg run with args in dir by the worker, inside its
// Landlock domain and seccomp filter, through a test hook: what the search
// costs before fsmcp adds anything of its own.
func confinedRG(b *testing.B, session *mcp.ClientSession, dir string, args []string) time.Duration {
	b.Helper()
	res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_stat",
		Arguments: map[string]any{"path": hookPrefix + "rgtime:" + dir + "\n" + strings.Join(args, "\n")}})
	if err != nil {
		b.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	_, rest, _ := strings.Cut(text, "rgtime ")
	var ns, n int64
	_, err = fmt.Sscanf(rest, "%d %d", &ns, &n)
	if err != nil || n == 0 || !strings.Contains(rest, " <nil>") && !strings.Contains(rest, " exit status 1") {
		b.Fatalf("rgtime: %s", text)
	}
	return time.Duration(ns)
}

// compareRuns runs rg, rg confined in the worker, and the served call
// alternately b.N times and reports the medians and the ratio of the
// served call to rg.
func compareRuns(b *testing.B, raw, confined, served func() time.Duration) {
	b.Helper()
	// One of each first, so caches are warm for all.
	raw()
	confined()
	served()
	var rs, cs, ss []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			rs = append(rs, raw())
			cs = append(cs, confined())
			ss = append(ss, served())
		} else {
			ss = append(ss, served())
			cs = append(cs, confined())
			rs = append(rs, raw())
		}
	}
	b.StopTimer()
	r, c, s := medianOf(rs), medianOf(cs), medianOf(ss)
	ratio := float64(s) / float64(r)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(r.Microseconds())/1000, "rg-p50-ms")
	b.ReportMetric(float64(c.Microseconds())/1000, "confined-rg-p50-ms")
	b.ReportMetric(float64(s.Microseconds())/1000, "fsmcp-p50-ms")
	b.ReportMetric(ratio, "ratio")
	b.Logf("%s: rg p50 %v, rg confined p50 %v, fsmcp p50 %v: ratio %.3f (confined rg %.3f) n=%d",
		b.Name(), r, c, s, ratio, float64(c)/float64(r), b.N)
}

// searchRawFlags are the options the worker passes rg itself.
var searchRawFlags = []string{"--no-config", "--no-ignore-parent", "--no-ignore-global", "--no-follow", "--no-pre",
	"--no-search-zip", "--color=never"}

func BenchmarkSearchGrep(b *testing.B) {
	root := searchBenchTree(b)
	session := searchBenchServer(b, root)
	// No match, a few hundred, tens of thousands.
	for _, pattern := range []string{"zq9xjv", "func main", "if err != nil"} {
		b.Run(strings.ReplaceAll(pattern, " ", "_"), func(b *testing.B) {
			_, text := timedCall(b, session, "fs_grep", map[string]any{"path": "", "pattern": pattern})
			if strings.Contains(text, `"type":"match"`) != (pattern != "zq9xjv") {
				b.Fatalf("fs_grep(%q) = %.200s", pattern, text)
			}
			args := append(slices.Clone(searchRawFlags), "--json", "--case-sensitive", "--regexp="+pattern,
				"--glob=!"+searchTempPrefix+"*", "--", ".")
			compareRuns(b,
				func() time.Duration { return timedRaw(b, root, args...) },
				func() time.Duration { return confinedRG(b, session, root, args) },
				func() time.Duration {
					d, _ := timedCall(b, session, "fs_grep", map[string]any{"path": "", "pattern": pattern})
					return d
				})
		})
	}
}

func BenchmarkSearchGlob(b *testing.B) {
	root := searchBenchTree(b)
	session := searchBenchServer(b, root)
	for _, pattern := range []string{"*", "*_test.go"} {
		b.Run(strings.ReplaceAll(pattern, "*", "star"), func(b *testing.B) {
			args := append(slices.Clone(searchRawFlags), "--files", "--null", "--glob="+pattern,
				"--glob=!"+searchTempPrefix+"*", "--", ".")
			compareRuns(b,
				func() time.Duration { return timedRaw(b, root, args...) },
				func() time.Duration { return confinedRG(b, session, root, args) },
				func() time.Duration {
					d, _ := timedCall(b, session, "fs_glob", map[string]any{"path": "", "pattern": pattern})
					return d
				})
		})
	}
}

func BenchmarkSearchTree(b *testing.B) {
	root := searchBenchTree(b)
	session := searchBenchServer(b, root)
	args := append(slices.Clone(searchRawFlags), "--files", "--null", "--glob=!"+searchTempPrefix+"*", "--", ".")
	for _, depth := range []int{3, 16} {
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			compareRuns(b,
				func() time.Duration { return timedRaw(b, root, args...) },
				func() time.Duration { return confinedRG(b, session, root, args) },
				func() time.Duration {
					d, _ := timedCall(b, session, "fs_tree", map[string]any{"path": "", "max_depth": depth})
					return d
				})
		})
	}
}
