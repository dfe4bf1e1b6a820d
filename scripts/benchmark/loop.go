package main

// The loop mode (--raw --loop "TOOL ARGS" --calls N): one fsmcp on the
// generated tree, one call at a time through the raw client, and the CPU
// each process of the server spent per call. scripts/profile records the
// processes with perf while it runs.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func loopRows(bin, root, loop string, calls int) ([]row, error) {
	tool, args, _ := strings.Cut(loop, " ")
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return nil, fmt.Errorf("--loop %q: the arguments are not a JSON object: %w", loop, err)
	}
	if err := settle(root, "f4k"); err != nil {
		return nil, err
	}
	// The raw rows' flags: a 1 MiB read is one page.
	s, err := startRawServer("fsmcp", []string{bin, "--root", root, "--max-response-bytes", "2097152"}, false, root)
	if err != nil {
		return nil, err
	}
	defer s.close()
	for range 100 { // warm up
		if err := s.tool(tool, a); err != nil {
			return nil, err
		}
	}
	procs := processTree(s.cmd.Process.Pid)
	before := make([][2]float64, len(procs))
	for i, p := range procs {
		before[i] = processCPU(p)
	}
	fmt.Fprintf(os.Stderr, "loop: %d calls of %s; processes %v\n", calls, tool, procs)
	t0 := time.Now()
	for range calls {
		if err := s.tool(tool, a); err != nil {
			return nil, err
		}
	}
	wall := time.Since(t0)
	rows := []row{{Name: fmt.Sprintf("%s, one at a time: wall per call", tool), Value: float64(wall.Microseconds()) / float64(calls), Unit: "µs"}}
	for i, p := range procs {
		c := processCPU(p)
		user := (c[0] - before[i][0]) / float64(calls) * 1e6
		sys := (c[1] - before[i][1]) / float64(calls) * 1e6
		rows = append(rows, row{Name: fmt.Sprintf("%s, CPU per call: %s (pid %d), user %.0f µs + system %.0f µs", tool, processName(p), p, user, sys),
			Value: user + sys, Unit: "µs"})
	}
	return rows, nil
}

// processTree is pid and its descendants, parents first.
func processTree(pid int) []int {
	out := []int{pid}
	for _, c := range children(pid) {
		out = append(out, processTree(c)...)
	}
	return out
}

// processCPU is the user and system seconds pid has run so far.
func processCPU(pid int) [2]float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return [2]float64{}
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	user, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return [2]float64{user / 100, sys / 100} // USER_HZ
}

// processName is what /proc calls pid.
func processName(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// shareOf names what a sample's call stack passing through a frame whose
// symbol contains pattern is spending its time on.
type shareOf struct{ label, pattern string }

var shares = []shareOf{
	{"system calls (kernel entry)", "entry_SYSCALL_64"},
	{"  write(2)", "syscall.write"},
	{"  read(2)", "syscall.read"},
	{"  futex(2): waking and parking threads", "runtime.futex"},
	{"  epoll_pwait(2)", "runtime.netpoll"},
	{"Go scheduler: finding work (spinning included)", "runtime.findRunnable"},
	{"Go scheduler: sysmon", "runtime.sysmon"},
	{"stack growth", "runtime.newstack"},
	{"garbage collector (mark workers)", "runtime.gcBgMarkWorker"},
	{"allocation", "runtime.mallocgc"},
	{"go-sdk: a request's handling, tool handler included", "jsonrpc2.(*Connection).handleAsync"},
	{"  go-sdk: internal/json.Unmarshal", "go-sdk/internal/json.Unmarshal"},
	{"  fsmcp: the tool handler and its audit line", "(*auditLog).wrap"},
	{"  fsmcp: the tool result's encoding", "encodeResult"},
	{"fsmcp: stdin read and message decode", "frontend.(*stdioConn).readLoop"},
	{"fsmcp: stdout write", "frontend.(*stdioConn).Write"},
	{"fsmcp: Calls stream client", "proto/callstream."},
	{"gRPC: transport reader", "transport.(*http2Client).reader"},
	{"gRPC: transport reader", "transport.(*http2Server).HandleStreams"},
	{"gRPC: loopy writer", "transport.(*loopyWriter).run"},
	{"worker: Calls stream, one call through its interceptors", "worker.served.call"},
	{"  worker: Stat", "worker.(*Service).stat"},
	{"  worker: name resolution", "worker.(*Service).statName"},
	{"  worker: sha256 (cached or read)", "worker.(*Service).hash"},
}

// perfShares reads `perf script -F comm,ip,sym` output (a line naming
// the process, then one line per frame, leaf first) from file, and for the
// front-end (comm fsmcp) and the worker (comm exe: it runs from a sealed
// memfd) prints the share of the process's samples whose stack passes
// through each function of shares. The shares overlap: they are
// inclusive.
func perfShares(file string, w io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	type tally struct {
		samples int
		under   map[string]int
	}
	by := map[string]*tally{"fsmcp": {under: map[string]int{}}, "exe": {under: map[string]int{}}}
	var cur *tally
	var seen map[string]bool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			cur = by[strings.TrimSpace(line)]
			if cur != nil {
				cur.samples++
				seen = map[string]bool{}
			}
			continue
		}
		if cur == nil {
			continue
		}
		for _, s := range shares {
			if !seen[s.label] && strings.Contains(line, s.pattern) {
				seen[s.label] = true
				cur.under[s.label]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, p := range []struct{ comm, name string }{{"fsmcp", "front-end"}, {"exe", "worker"}} {
		t := by[p.comm]
		if t.samples == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: %d samples; the share of them under each function\n", p.name, t.samples)
		printed := map[string]bool{}
		for _, s := range shares {
			if n := t.under[s.label]; n > 0 && !printed[s.label] {
				printed[s.label] = true
				fmt.Fprintf(w, "  %5.1f%%  %s\n", 100*float64(n)/float64(t.samples), s.label)
			}
		}
	}
	return nil
}

// coldStartRows times spawn → initialize answered (the go-sdk client over
// stdio, as the full run's cold-start row) for each build in turn, 60
// times each, and compares each with the last build.
func coldStartRows(bins []struct{ name, bin string }, root string) ([]row, error) {
	lat := make([][]float64, len(bins))
	for i := range 61 {
		for j, b := range bins {
			l, err := sample(1, func() error {
				s, err := startStdio(b.bin, root)
				if err != nil {
					return err
				}
				return s.cs.Close()
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.name, err)
			}
			if i > 0 { // the first of each warms the page cache
				lat[j] = append(lat[j], l...)
			}
		}
	}
	for _, l := range lat {
		slices.Sort(l)
	}
	var rows []row
	last := len(bins) - 1
	for j, b := range bins {
		var base []float64
		baseName := ""
		if j != last {
			base, baseName = lat[last], bins[last].name
		}
		rows = append(rows, latencyRow("cold start to initialize: "+b.name, lat[j], baseName, base, "", nil))
	}
	return rows, nil
}
