package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkReadManyVsSequential compares one fs_read_many of 20 files of
// 4 KiB with 20 fs_read calls one after the other, through the whole
// server (go-sdk client over stdio, front-end, gRPC, confined worker), in
// one session. Each iteration runs both, alternately, so the two share
// the machine's load; the metrics are each one's p50 and the ratio of the
// p50s (read_many/sequential: below 1 is faster). Run with -count for
// repeats, e.g.
//
//	go test -run '^$' -bench ReadManyVsSequential -count 10 ./cmd/fsmcp
func BenchmarkReadManyVsSequential(b *testing.B) {
	root := b.TempDir()
	const files = 20
	var paths []any
	for i := range files {
		name := fmt.Sprintf("f%02d.txt", i)
		if err := os.WriteFile(filepath.Join(root, name), bytes.Repeat([]byte{'a' + byte(i)}, 4096), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, name)
	}
	s := benchServer(b, root, "--max-response-bytes", "262144")
	ctx := context.Background()
	call := func(name string, args map[string]any) string {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	many := map[string]any{"paths": paths}
	completeAll := fmt.Sprintf(`"complete":%d`, files)
	var lat, seq []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if doc := call("fs_read_many", many); !bytes.Contains([]byte(doc), []byte(completeAll)) {
			b.Fatalf("fs_read_many returned fewer than %d files whole: %.300s", files, doc)
		}
		t1 := time.Now()
		for _, p := range paths {
			call("fs_read", map[string]any{"path": p})
		}
		lat, seq = append(lat, t1.Sub(t0)), append(seq, time.Since(t1))
	}
	slices.Sort(lat)
	slices.Sort(seq)
	p50 := func(d []time.Duration) float64 { return float64(d[len(d)/2].Microseconds()) }
	b.ReportMetric(p50(lat), "read_many-p50-µs")
	b.ReportMetric(p50(seq), "20×read-p50-µs")
	b.ReportMetric(p50(lat)/p50(seq), "ratio")
}
