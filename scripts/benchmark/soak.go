package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// soak runs fsmcp under mixed load for o.soak (reads, lists, stats with
// and without hashes, greps, globs, writes, replaces, mkdirs, moves,
// deletes, and calls that fail: missing paths, stale preconditions, edits
// over --max-file-bytes, calls cancelled mid-way) from several clients at
// once, and prints the RSS and descriptor counts of the front-end and the
// worker every o.soakEvery, then their drift: the last sample against the
// first one after warm-up.
func soak(o options) error {
	tmp, err := os.MkdirTemp("", "fsmcp-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.bin == "" {
		o.bin = filepath.Join(tmp, "fsmcp")
		build := exec.Command("go", "build", "-trimpath", "-o", o.bin, "./cmd/fsmcp")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	root := filepath.Join(tmp, "root")
	if err := generate(root, 32<<20); err != nil {
		return err
	}
	s, err := startStdio(o.bin, root, "--max-file-bytes", strconv.Itoa(8<<20), "--call-timeout", "5s")
	if err != nil {
		return err
	}
	defer s.cs.Close()
	front := s.cmd.Process.Pid
	kids := children(front)
	if len(kids) != 1 {
		return fmt.Errorf("fsmcp has children %v, want one worker", kids)
	}
	worker := kids[0]
	f4k, err := os.ReadFile(filepath.Join(root, "f4k"))
	if err != nil {
		return err
	}
	f4kSum := sha(f4k)

	ctx, cancel := context.WithTimeout(context.Background(), o.soak)
	defer cancel()
	var calls, failures atomic.Int64
	var wg sync.WaitGroup
	const clients = 8
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(c)))
			for i := 0; ctx.Err() == nil; i++ {
				name, args := soakCall(rnd, c, i, f4kSum)
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				if rnd.Intn(50) == 0 {
					// Abandoned mid-way, as a client that gives up.
					cctx, ccancel = context.WithTimeout(ctx, time.Duration(rnd.Intn(20))*time.Millisecond)
				}
				res, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
				ccancel()
				calls.Add(1)
				if err != nil || res.IsError {
					failures.Add(1)
				}
				if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "context deadline exceeded") {
					fmt.Fprintf(os.Stderr, "soak: %s: %v\n", name, err)
				}
			}
		}()
	}

	type point struct {
		at                   time.Duration
		frontRSS, workerRSS  float64
		frontFDs, workerFDs  int
		calls, failed        int64
		workerAlive, frontUp bool
	}
	var points []point
	start := time.Now()
	sample := func() {
		points = append(points, point{at: time.Since(start).Round(time.Second),
			frontRSS: vmRSS(front), workerRSS: vmRSS(worker), frontFDs: fdCount(front), workerFDs: fdCount(worker),
			calls: calls.Load(), failed: failures.Load()})
	}
	sample()
	tick := time.NewTicker(o.soakEvery)
	for done := false; !done; {
		select {
		case <-tick.C:
			sample()
		case <-ctx.Done():
			done = true
		}
	}
	tick.Stop()
	wg.Wait()
	sample()

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "time\tfront-end RSS\tworker RSS\tfront-end fds\tworker fds\tcalls\tfailed\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%v\t%.1f MiB\t%.1f MiB\t%d\t%d\t%d\t%d\t\n", p.at, p.frontRSS, p.workerRSS, p.frontFDs, p.workerFDs, p.calls, p.failed)
	}
	tw.Flush()
	// Warm-up: the first tenth of the run (caches, pools, thread counts).
	base := points[min(len(points)-1, max(1, len(points)/10))]
	last := points[len(points)-1]
	fmt.Printf("drift after warm-up (%v to %v): front-end %+.1f MiB, %+d fds; worker %+.1f MiB, %+d fds; %d calls, %.0f/s\n",
		base.at, last.at, last.frontRSS-base.frontRSS, last.frontFDs-base.frontFDs,
		last.workerRSS-base.workerRSS, last.workerFDs-base.workerFDs, last.calls,
		float64(last.calls)/o.soak.Seconds())
	if kids := children(front); len(kids) != 1 || kids[0] != worker {
		return fmt.Errorf("the worker changed: %v, was %d", kids, worker)
	}
	return nil
}

// soakCall picks one call of the mix for client c's i-th turn. Each
// client works in its own directory, so its preconditions are its own.
func soakCall(rnd *rand.Rand, c, i int, f4kSum string) (string, map[string]any) {
	dir := fmt.Sprintf("soak%d", c)
	f := fmt.Sprintf("%s/f%d", dir, i%16)
	switch rnd.Intn(14) {
	case 0:
		return "fs_stat", map[string]any{"path": "big"}
	case 1:
		return "fs_list", map[string]any{"path": "dir1000"}
	case 2:
		return "fs_read", map[string]any{"path": "f256k", "offset": rnd.Intn(200 << 10)}
	case 3:
		return "fs_grep", map[string]any{"path": "", "pattern": "MARKER-A"}
	case 4:
		return "fs_glob", map[string]any{"path": "", "pattern": "**/*.txt"}
	case 5:
		return "fs_mkdir", map[string]any{"path": dir + "/sub/deeper"}
	case 6:
		// Creates, or fails with precondition_failed when it exists.
		return "fs_write", map[string]any{"path": f, "content": strings.Repeat("line of text\n", 1+rnd.Intn(4000)), "if_sha256": nil}
	case 7:
		// A stale precondition: precondition_failed.
		return "fs_write", map[string]any{"path": f, "content": "x", "if_sha256": strings.Repeat("0", 64)}
	case 8:
		return "fs_replace", map[string]any{"path": f, "if_sha256": strings.Repeat("0", 64),
			"edits": []map[string]any{{"old": "line", "new": "LINE", "all": true}}}
	case 9:
		return "fs_move", map[string]any{"from": f, "to": f + ".moved"}
	case 10:
		return "fs_delete", map[string]any{"path": f + ".moved"}
	case 11:
		return "fs_delete", map[string]any{"path": dir + "/sub", "recursive": true}
	case 12:
		return "fs_stat", map[string]any{"path": "no/such/file"}
	}
	// Over --max-file-bytes: too_large before anything is allocated.
	return "fs_replace", map[string]any{"path": "f4k", "if_sha256": f4kSum,
		"edits": []map[string]any{{"old": "o", "new": strings.Repeat("o", 4096), "all": true}}}
}

func vmRSS(pid int) float64 { return statusMiB(pid, "VmRSS:") }

func fdCount(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}
