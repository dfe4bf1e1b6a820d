package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkExecTrivial is the cold-start cost of one trivial command:
// fs_exec of /usr/bin/true through the whole server (MCP, gRPC to the
// command runner, a new PID namespace, the shim's Landlock and seccomp,
// exec), against two baselines of the same run: fork and exec of true by
// the test itself, and an fs_stat through the same server (the MCP and
// gRPC hop alone). fs_exec_policy is the same command with
// --exec-writable, whose default protected set makes each command's shim
// walk a repository's top and split its Landlock rule (see rootRules).
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
	// A repository's top: .git, protected by default, splits the root.
	repo := benchTree(b)
	if err := os.MkdirAll(filepath.Join(repo, ".git", "hooks"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	writable := benchServer(b, repo, "--exec", "/usr/bin/true", "--exec-writable")
	trivial := &mcp.CallToolParams{Name: "fs_exec", Arguments: map[string]any{"argv": []string{"true"}}}
	for _, c := range []struct {
		name   string
		s      *mcp.ClientSession
		params *mcp.CallToolParams
	}{
		{"fs_stat", s, &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "f.txt"}}},
		{"fs_exec", s, trivial},
		{"fs_exec_policy", writable, trivial},
	} {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				res, err := c.s.CallTool(context.Background(), c.params)
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %v", c.name, err, res)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
	}
}
