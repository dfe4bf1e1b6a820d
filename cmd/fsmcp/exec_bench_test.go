package main

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkExecTrivial is the cold-start cost of one trivial command:
// fs_exec of /usr/bin/true through the whole server (MCP, gRPC to the
// command runner, a new PID namespace, the shim's Landlock and seccomp,
// exec), against two baselines of the same run: fork and exec of true by
// the test itself, and an fs_stat through the same server (the MCP and
// gRPC hop alone).
func BenchmarkExecTrivial(b *testing.B) {
	root := benchTree(b)
	b.Run("direct", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if err := exec.Command("/usr/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
	s := benchServer(b, root, "--exec", "/usr/bin/true")
	for _, c := range []struct {
		name   string
		params *mcp.CallToolParams
	}{
		{"fs_stat", &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "f.txt"}}},
		{"fs_exec", &mcp.CallToolParams{Name: "fs_exec", Arguments: map[string]any{"argv": []string{"true"}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				res, err := s.CallTool(context.Background(), c.params)
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %v", c.name, err, res)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
	}
}
