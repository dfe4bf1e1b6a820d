package main

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reportLatency records per-op latencies' p50/p90/p99 as benchmark metrics.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.90), "p90-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

func benchTree(b *testing.B) string {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f.txt"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	return root
}

// BenchmarkStat compares fs_stat of a 4 KiB file through the whole server
// (MCP client → front-end → gRPC → confined worker) with the same lstat and
// hash as direct calls on an os.Root: the difference is the MCP + gRPC hop.
func BenchmarkStat(b *testing.B) {
	root := benchTree(b)
	b.Run("inprocess", func(b *testing.B) {
		r, err := os.OpenRoot(root)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if _, err := r.Lstat("f.txt"); err != nil {
				b.Fatal(err)
			}
			f, err := r.Open("f.txt")
			if err != nil {
				b.Fatal(err)
			}
			h := sha256.New()
			io.Copy(h, f)
			f.Close()
			h.Sum(nil)
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
	b.Run("server", func(b *testing.B) {
		s := benchServer(b, root)
		ctx := context.Background()
		params := &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "f.txt"}}
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			res, err := s.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("fs_stat: %v %v", err, res)
			}
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
}

// benchServer starts fsmcp on root with a go-sdk client over stdio.
func benchServer(b *testing.B, root string, flags ...string) *mcp.ClientSession {
	b.Helper()
	cmd := fsmcpCommand(root, flags...)
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-bench", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { session.Close() })
	return session
}

// BenchmarkColdStart measures spawn → initialize answered, including the
// worker's start, rg's version probe and both Landlock restrictions.
func BenchmarkColdStart(b *testing.B) {
	root := benchTree(b)
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-bench", Version: "1"}, nil)
		session, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: fsmcpCommand(root)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		session.Close()
	}
	reportLatency(b, lat)
}
