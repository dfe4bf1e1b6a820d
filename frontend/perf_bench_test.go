package frontend

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkStatLayers splits the cost of fs_stat of a 4 KiB file into the
// layers a call crosses, each measured in this one process with nothing
// confined, so that each sub-benchmark adds one layer to the one before:
//
//	worker    the worker's Stat (lstat, open, fstat, cached sha256)
//	grpc      + a unary gRPC round trip over a socketpair, with fsmcp's
//	          options and the worker's interceptors
//	stream    the same Stat as a call on the worker's Calls stream, as the
//	          front-end sends it: compare with grpc
//	handler   + the tool handler: argument checks, the reply, the audit line
//	mcp       + the go-sdk server and client over in-memory transports
//
// What the end-to-end BenchmarkStat in cmd/fsmcp adds beyond mcp is the
// stdio pipes, three processes' wake-ups and the confinement.
func BenchmarkStatLayers(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f4k"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	// The hash cache takes only files whose ctime is a second old (an
	// old mtime would not do: setting it sets the ctime).
	time.Sleep(1100 * time.Millisecond)
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	svc, err := worker.New(r, worker.Options{MaxRead: 262144})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := &fsmcpv1.StatRequest{Path: []byte("f4k")}
	b.Run("worker", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if _, err := svc.Stat(ctx, req); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})

	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	mine, err := net.FileConn(os.NewFile(uintptr(fds[0]), "front-end"))
	if err != nil {
		b.Fatal(err)
	}
	theirs, err := net.FileConn(os.NewFile(uintptr(fds[1]), "worker"))
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- worker.Serve(theirs, svc, nil) }()
	wc, err := dialWorker(mine)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { wc.close(); <-served }()
	for _, via := range []struct {
		name string
		c    fsmcpv1.WorkerServiceClient
	}{{"grpc", fsmcpv1.NewWorkerServiceClient(wc.cc)}, {"stream", wc}} {
		b.Run(via.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			cpu0 := hopCPU(b)
			for b.Loop() {
				t0 := time.Now()
				if _, err := via.c.Stat(ctx, req); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.ReportMetric(float64(hopCPU(b)-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
			reportP50(b, lat)
		})
	}

	audit, err := openAudit("", io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	s := &server{cfg: &Config{MaxResponseBytes: 262144, CallTimeout: time.Minute, MaxCalls: 64, MaxSessionCalls: 16}, wc: wc, audit: audit}
	stat := statTool.tool()
	h := audit.wrap(stat, recovered(stat.name, s.handler(stat)))
	call := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "fs_stat", Arguments: json.RawMessage(`{"path":"f4k"}`)}}
	b.Run("handler", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			res, err := h(ctx, call)
			if err != nil || res.IsError {
				b.Fatalf("fs_stat: %v %v", err, res)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})

	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.build().Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "f4k"}}
	b.Run("mcp", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("fs_stat: %v %v", err, res)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
}

func reportP50(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
}
