package frontend

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkGlobPage measures fs_glob of **/*.go over $(go env GOROOT)/src
// with a reply bound that holds the whole listing (about 390 KB), in this
// one process with nothing confined: the worker (rg, the page), gRPC over
// a socketpair, the tool handler and the reply's encoding as the stdio
// connection writes it. Sub-benchmarks:
//
//	vs-rg   fs_glob and `rg --files -g '*.go'` in turns, each iteration
//	        timing both: the medians and their ratio
//	fsmcp   fs_glob alone, with this process's CPU per call (rg's is
//	        not counted), to profile (-cpuprofile sees both sides)
//	encode  the reply's encoding alone, of one fs_glob result
func BenchmarkGlobPage(b *testing.B) {
	root := filepath.Join(runtime.GOROOT(), "src")
	cfg, _, err := parseFlags([]string{"--root", root, "--state-dir", b.TempDir(), "--read-only",
		"--max-response-bytes", "1048576"}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	if err := cfg.check(); err != nil {
		b.Fatal(err)
	}
	wc, _ := startWorker(b, cfg)
	audit, err := openAudit("", io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	s := &server{cfg: documentConfig(cfg), wc: wc, audit: audit}
	tool := globTool.tool()
	h := audit.wrap(tool, recovered(tool.name, s.handler(tool)))
	call := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "fs_glob",
		Arguments: json.RawMessage(`{"path":"","pattern":"**/*.go"}`)}}
	ctx := context.Background()
	result := func(b *testing.B) *mcp.CallToolResult {
		res, err := h(ctx, call)
		if err != nil || res.IsError {
			b.Fatalf("fs_glob: %v %v", err, res)
		}
		return res
	}
	glob := func(b *testing.B) int {
		enc, ok := encodeToolResult(result(b), true)
		if !ok {
			b.Fatal("fs_glob's result is not one the stdio encoder covers")
		}
		return len(enc)
	}
	rg := func(b *testing.B) {
		cmd := exec.Command(cfg.RG, "--files", "-g", "*.go")
		cmd.Dir = root
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("vs-rg", func(b *testing.B) {
		var ours, theirs []time.Duration
		var size int
		for b.Loop() {
			t0 := time.Now()
			rg(b)
			t1 := time.Now()
			size = glob(b)
			theirs, ours = append(theirs, t1.Sub(t0)), append(ours, time.Since(t1))
		}
		b.ReportMetric(float64(size), "reply-bytes")
		b.ReportMetric(median(ours).Seconds()*1e3, "fsmcp-ms")
		b.ReportMetric(median(theirs).Seconds()*1e3, "rg-ms")
		b.ReportMetric(float64(median(ours))/float64(median(theirs)), "ratio")
	})
	b.Run("fsmcp", func(b *testing.B) {
		cpu0 := hopCPU(b)
		for b.Loop() {
			glob(b)
		}
		b.ReportMetric(float64(hopCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	})
	b.Run("encode", func(b *testing.B) {
		res := result(b)
		for b.Loop() {
			if _, ok := encodeToolResult(res, true); !ok {
				b.Fatal("not encoded")
			}
		}
	})
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
