package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkContactHTTPSessions: fs_stat from 256 concurrent HTTP sessions
// on one server, with the front-end's own soft memory limit and with
// GOMEMLIMIT=1GiB (no effective limit) in the same run. It reports
// calls/s, the 99th percentile latency and the collector's cycles per
// second (GODEBUG=gctrace=1 on the front-end's stderr).
//
//	go test -run '^$' -bench ContactHTTPSessions -benchtime 20000x ./cmd/fsmcp
func BenchmarkContactHTTPSessions(b *testing.B) {
	const sessions = 256
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct{ name, env string }{{"frontend-limit", ""}, {"GOMEMLIMIT=1GiB", "GOMEMLIMIT=1GiB"}} {
		b.Run(v.name, func(b *testing.B) {
			cmd := fsmcpCommand(root, "--transport", "http", "--listen", "127.0.0.1:0")
			cmd.Env = append(cmd.Env, "GODEBUG=gctrace=1")
			if v.env != "" {
				cmd.Env = append(cmd.Env, v.env)
			}
			h := runHTTP(b, cmd, "bound")
			css := make([]*mcp.ClientSession, sessions)
			for i := range css {
				cs, err := connectHTTP(h)
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				css[i] = cs
			}
			var (
				mu        sync.Mutex
				latencies []time.Duration
				next      atomic.Int64
			)
			gcBefore := strings.Count(h.stderr.String(), "\ngc ")
			b.SetParallelism((sessions + 1) / 2)
			b.ResetTimer()
			began := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				cs := css[int(next.Add(1)-1)%sessions]
				var mine []time.Duration
				for pb.Next() {
					t0 := time.Now()
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "a.txt"}})
					if err != nil || res.IsError {
						b.Errorf("fs_stat: %v %v", err, res)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			})
			elapsed := time.Since(began)
			b.StopTimer()
			gcs := strings.Count(h.stderr.String(), "\ngc ") - gcBefore
			slices.Sort(latencies)
			if len(latencies) > 0 {
				b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
			}
			b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(gcs)/elapsed.Seconds(), "gc/s")
		})
	}
}
