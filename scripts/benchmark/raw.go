package main

// The raw-client mode (--raw): fsmcp against the official Node
// @modelcontextprotocol/server-filesystem, measured by a lean JSON-RPC
// client (no SDK, requests pre-serialised, K in flight), servers
// interleaved round by round, server CPU summed over each server's process
// tree from /proc. With --before REV, a build of that revision runs in the
// same rounds, so before and after come from one sitting. With node and
// the official SDK installed (--node DIR holding node_modules), the
// official TypeScript SDK client measures every tool against both servers.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// rawServer is one server process driven by the raw client.
type rawServer struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	wmu  sync.Mutex
	mu   sync.Mutex
	wait map[int64]chan []byte
	next int64
	dead chan struct{}
	// official servers take other tool names and absolute paths.
	official bool
	root     string
}

func startRawServer(name string, argv []string, official bool, root string) (*rawServer, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &rawServer{name: name, cmd: cmd, in: in, wait: map[int64]chan []byte{}, dead: make(chan struct{}), official: official, root: root}
	go s.readLoop(bufio.NewReaderSize(out, 1<<20))
	if _, err := s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-bench","version":"1"}}`); err != nil {
		s.close()
		return nil, fmt.Errorf("%s: initialize: %w", name, err)
	}
	s.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	return s, nil
}

func (s *rawServer) readLoop(r *bufio.Reader) {
	defer close(s.dead)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		id, ok := replyID(line)
		if !ok {
			continue // a notification
		}
		s.mu.Lock()
		ch := s.wait[id]
		delete(s.wait, id)
		s.mu.Unlock()
		if ch != nil {
			ch <- line
		}
	}
}

// replyID finds "id":N in a reply without decoding it whole. Inside the
// result's text every quote is escaped, so the first match is the
// envelope's.
func replyID(line []byte) (int64, bool) {
	i := bytes.Index(line, []byte(`"id":`))
	if i < 0 {
		return 0, false
	}
	j := i + len(`"id":`)
	k := j
	for k < len(line) && line[k] >= '0' && line[k] <= '9' {
		k++
	}
	n, err := strconv.ParseInt(string(line[j:k]), 10, 64)
	return n, err == nil
}

func (s *rawServer) send(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.in.Write(b)
	return err
}

// call sends method with params and waits for its reply.
func (s *rawServer) call(method, params string) ([]byte, error) {
	s.mu.Lock()
	s.next++
	id := s.next
	ch := make(chan []byte, 1)
	s.wait[id] = ch
	s.mu.Unlock()
	msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	if err := s.send(msg); err != nil {
		return nil, err
	}
	select {
	case line := <-ch:
		if bytes.Contains(line[:min(len(line), 200)], []byte(`"error":{`)) || bytes.Contains(line, []byte(`"isError":true`)) {
			return nil, fmt.Errorf("%s: %.300s", s.name, line)
		}
		return line, nil
	case <-s.dead:
		return nil, fmt.Errorf("%s exited", s.name)
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("%s: no reply to %s", s.name, method)
	}
}

// tool calls an fsmcp tool, or the official server's equivalent.
func (s *rawServer) tool(name string, args map[string]any) error { return s.toolAs(name, args, "") }

// toolAs calls an fsmcp tool, or on the official server its equivalent,
// or the official tool as when it is set.
func (s *rawServer) toolAs(name string, args map[string]any, as string) error {
	if s.official {
		var ok bool
		if name, args, ok = officialTool(name, args, s.root); !ok {
			return fmt.Errorf("no official equivalent of %s", name)
		}
		if as != "" {
			name = as
		}
	}
	a, _ := json.Marshal(args)
	_, err := s.call("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, a))
	return err
}

// officialTool maps an fsmcp call to the official server's.
func officialTool(name string, args map[string]any, root string) (string, map[string]any, bool) {
	abs := func(p any) string { return filepath.Join(root, fmt.Sprint(p)) }
	switch name {
	case "fs_stat":
		return "get_file_info", map[string]any{"path": abs(args["path"])}, true
	case "fs_read":
		return "read_text_file", map[string]any{"path": abs(args["path"])}, true
	case "fs_list":
		return "list_directory", map[string]any{"path": abs(args["path"])}, true
	case "fs_glob":
		return "search_files", map[string]any{"path": root, "pattern": args["pattern"]}, true
	}
	return "", nil, false
}

func (s *rawServer) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// cpu is the CPU time of the server's process tree so far, in seconds,
// children that exited (rg) included.
func (s *rawServer) cpu() float64 { return treeCPU(s.cmd.Process.Pid) }

func treeCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	total := ticks / 100 // USER_HZ
	for _, c := range children(pid) {
		total += treeCPU(c)
	}
	return total
}

// rawRun is one measurement of one server: latencies of n calls made k at
// a time, the wall time and the server CPU they took.
type rawRun struct {
	lat  []float64
	wall float64
	cpu  float64
	n    int
}

func (s *rawServer) measure(n, k int, call func() error) (rawRun, error) {
	lat := make([]float64, n)
	c0 := s.cpu()
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for w := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += k {
				t := time.Now()
				if err := call(); err != nil {
					errs <- err
					return
				}
				lat[i] = float64(time.Since(t).Nanoseconds()) / 1e3
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return rawRun{}, err
	}
	return rawRun{lat: lat, wall: time.Since(t0).Seconds(), cpu: s.cpu() - c0, n: n}, nil
}

// rawOptions configure the raw mode.
type rawOptions struct {
	before string // a revision to build and measure beside this build
	node   string // directory with node_modules of the official server and SDK
	memory bool   // only the memory-under-load rows
	search bool   // only the Go-tree search rows
	// rows, when set, keeps only the raw-client rows whose name it
	// matches (the search, TS-client and memory rows are skipped).
	rows string
	// loop, when set, is a tool and its arguments to call calls times
	// instead of the rows (loop.go).
	loop  string
	calls int
	// coldStart: only the cold start of each build, in turns.
	coldStart bool
}

func rawRows(o options, ro rawOptions, tmp string) ([]row, error) {
	root := filepath.Join(tmp, "root")
	bins := []struct{ name, bin string }{{"fsmcp", o.bin}}
	if ro.before != "" {
		b, err := buildRevision(ro.before, tmp)
		if err != nil {
			return nil, err
		}
		bins = append(bins, struct{ name, bin string }{"fsmcp@" + ro.before, b})
	}
	if ro.memory {
		return memoryUnderLoadRows(o, bins, root)
	}
	if ro.loop != "" {
		return loopRows(o.bin, root, ro.loop, ro.calls)
	}
	if ro.coldStart {
		return coldStartRows(bins, root)
	}

	var servers []*rawServer
	defer func() {
		for _, s := range servers {
			s.close()
		}
	}()
	for _, b := range bins {
		s, err := startRawServer(b.name, []string{b.bin, "--root", root, "--max-response-bytes", "2097152"}, false, root)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	official := officialCommand(ro.node, root)
	if official != nil {
		s, err := startRawServer("official", official, true, root)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	// fsmcp caches a file's sha256 only once the file has settled (its
	// ctime a second old, worker/internal/hashcache): the fixture, just
	// written, is measured as the files an agent stats mostly are.
	if err := settle(root, "f4k"); err != nil {
		return nil, err
	}
	rounds, per := 10, o.samples/5
	if o.smoke {
		rounds, per = 2, 5
	}
	var only *regexp.Regexp
	if ro.rows != "" {
		var err error
		if only, err = regexp.Compile(ro.rows); err != nil {
			return nil, fmt.Errorf("--rows: %w", err)
		}
	}
	var rows []row
	for _, c := range []struct {
		name string
		tool string
		args map[string]any
		k    int
		// official, when set, is the official tool to compare with.
		official string
	}{
		{"raw fs_stat 4 KiB", "fs_stat", map[string]any{"path": "f4k"}, 1, ""},
		{"raw fs_read 4 KiB", "fs_read", map[string]any{"path": "f4k"}, 1, ""},
		{"raw fs_read 1 MiB", "fs_read", map[string]any{"path": "f1m"}, 1, ""},
		{"raw fs_list 1,000 entries", "fs_list", map[string]any{"path": "dir1000"}, 1, ""},
		// fs_list gives each entry's size, mtime and mode: the official
		// tool that also stats each entry.
		{"raw fs_list 1,000 entries, official with sizes", "fs_list", map[string]any{"path": "dir1000"}, 1, "list_directory_with_sizes"},
		{"raw fs_stat, 8 in flight", "fs_stat", map[string]any{"path": "f4k"}, 8, ""},
		{"raw fs_read 4 KiB, 8 in flight", "fs_read", map[string]any{"path": "f4k"}, 8, ""},
	} {
		if only != nil && !only.MatchString(c.name) {
			continue
		}
		n := per
		if c.tool == "fs_read" && c.args["path"] == "f1m" || c.tool == "fs_list" {
			n = max(per/5, 3)
		}
		if c.k > 1 {
			n *= 4
		}
		runs := make([][]rawRun, len(servers))
		for _, s := range servers { // warm up
			if _, err := s.measure(3, 1, func() error { return s.toolAs(c.tool, c.args, c.official) }); err != nil {
				return nil, err
			}
		}
		for range rounds {
			for i, s := range servers {
				r, err := s.measure(n, c.k, func() error { return s.toolAs(c.tool, c.args, c.official) })
				if err != nil {
					return nil, fmt.Errorf("%s: %w", c.name, err)
				}
				runs[i] = append(runs[i], r)
			}
		}
		rows = append(rows, compareRows(c.name, c.k, servers, runs)...)
	}
	if only != nil {
		return rows, nil
	}
	more, err := rawSearchRows(o, bins[0].bin, rounds)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)
	if official != nil && ro.node != "" {
		more, err := tsClientRows(o, ro.node, bins[0].bin, root, rounds)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	more, err = memoryUnderLoadRows(o, bins, root)
	if err != nil {
		return nil, err
	}
	return append(rows, more...), nil
}

// compareRows reports each server's figures against the last one (the
// official server when present, else the first build).
func compareRows(name string, k int, servers []*rawServer, runs [][]rawRun) []row {
	type agg struct{ p50, cpu, rate float64 }
	sum := func(rs []rawRun) agg {
		var lat []float64
		var cpu, wall float64
		n := 0
		for _, r := range rs {
			lat = append(lat, r.lat...)
			cpu += r.cpu
			wall += r.wall
			n += r.n
		}
		slices.Sort(lat)
		return agg{p50: pct(lat, .5), cpu: cpu / float64(n) * 1e6, rate: float64(n) / wall}
	}
	var rows []row
	if len(servers) == 1 {
		a := sum(runs[0])
		r := row{Name: fmt.Sprintf("%s: %s", name, servers[0].name), Target: fmt.Sprintf("cpu %.0f µs/call", a.cpu)}
		if k > 1 {
			r.Value, r.Unit = a.rate, "calls/s"
		} else {
			r.P50us = a.p50
		}
		return append(rows, r)
	}
	base := len(servers) - 1
	b := sum(runs[base])
	for i, s := range servers[:base] {
		a := sum(runs[i])
		r := row{Name: fmt.Sprintf("%s: %s", name, s.name), Baseline: servers[base].name}
		if k > 1 {
			r.Value, r.Unit, r.BaseVal = a.rate, "calls/s", b.rate
			r.Ratio = a.rate / b.rate
		} else {
			r.P50us, r.BaseP50, r.Ratio = a.p50, b.p50, a.p50/b.p50
			r.Target = fmt.Sprintf("cpu %.0f µs/call vs %.0f (%.2fx)", a.cpu, b.cpu, a.cpu/b.cpu)
		}
		rows = append(rows, r)
	}
	return rows
}

// rawSearchRows: fs_glob, fs_grep and fs_tree over the Go tree, raw
// client, against rg run directly and against rg run with the worker's own
// arguments under the worker's own confinement (confined.go), all three
// interleaved call by call. fs_glob and fs_grep answer in one page of up
// to 1 MiB (the whole result); fs_tree in the default page.
func rawSearchRows(o options, bin string, rounds int) ([]row, error) {
	s, err := startRawServer("fsmcp", []string{bin, "--root", o.gotree, "--read-only", "--max-response-bytes", "1048576"}, false, o.gotree)
	if err != nil {
		return nil, err
	}
	defer s.close()
	// fs_tree with the default reply bound, as scripts/bench --read and
	// a client meet it: the first page (64 KiB) of the whole listing.
	ts, err := startRawServer("fsmcp", []string{bin, "--root", o.gotree, "--read-only"}, false, o.gotree)
	if err != nil {
		return nil, err
	}
	defer ts.close()
	confined, err := startConfinedRG(o.gotree)
	if err != nil {
		return nil, err
	}
	defer confined.close()
	rg := func(args ...string) func() error {
		return func() error {
			cmd := exec.Command("rg", args...)
			cmd.Dir = o.gotree
			cmd.Stdout = io.Discard
			err := cmd.Run()
			if e, ok := err.(*exec.ExitError); ok && e.ExitCode() == 1 {
				return nil
			}
			return err
		}
	}
	// The options the worker passes rg before a search's own (see
	// worker/search.go commonArgs and pathArgs).
	worker := func(args ...string) []string {
		return append(append([]string{"--no-config", "--no-ignore-parent", "--no-ignore-global", "--no-follow", "--no-pre",
			"--no-search-zip", "--color=never", "--no-ignore-messages"}, args...), "--glob=!.fsmcp-tmp-*", "--", ".")
	}
	var rows []row
	for _, c := range []struct {
		name, tool string
		args       map[string]any
		base       string
		run        func() error
		limit      float64
		// worker is what the worker runs rg with; confinedLimit bounds
		// the ratio to it, when set.
		worker        []string
		confinedLimit float64
	}{
		{"raw fs_glob **/*.go (Go tree)", "fs_glob", map[string]any{"path": "", "pattern": "**/*.go"}, "rg --files -g *.go",
			rg("--files", "-g", "*.go"), 1.15, worker("--files", "--null", "--glob=**/*.go"), 0},
		{"raw fs_grep 'func Benchmark' (Go tree)", "fs_grep", map[string]any{"path": "", "pattern": "func Benchmark"}, "rg --json",
			rg("--json", "func Benchmark"), 1.25, worker("--json", "--case-sensitive", "--regexp=func Benchmark"), 1.05},
		{"raw fs_tree depth 3 (Go tree)", "fs_tree", map[string]any{"path": "", "max_depth": 3}, "rg --files",
			rg("--files"), 1.3, worker("--files", "--null", "--debug", "--max-depth=4"), 0},
		{"raw fs_tree depth 16 (Go tree)", "fs_tree", map[string]any{"path": "", "max_depth": 16}, "rg --files",
			rg("--files"), 1.3, worker("--files", "--null", "--debug", "--max-depth=17"), 0},
	} {
		var lat, blat, clat []float64
		s := s
		if c.tool == "fs_tree" {
			s = ts
		}
		if err := s.tool(c.tool, c.args); err != nil {
			return nil, err
		}
		for i := range rounds * 3 {
			// Each of the three goes first in turn.
			for j := range 3 {
				switch (i + j) % 3 {
				case 0:
					l, err := sample(1, func() error { return s.tool(c.tool, c.args) })
					if err != nil {
						return nil, err
					}
					lat = append(lat, l...)
				case 1:
					b, err := sample(1, c.run)
					if err != nil {
						return nil, err
					}
					blat = append(blat, b...)
				case 2:
					d, err := confined.run(c.worker)
					if err != nil {
						return nil, err
					}
					clat = append(clat, float64(d.Nanoseconds())/1e3)
				}
			}
		}
		slices.Sort(lat)
		slices.Sort(blat)
		slices.Sort(clat)
		rows = append(rows, latencyRow(c.name, lat, c.base, blat, fmt.Sprintf("≤ %.2fx", c.limit), ratioAtMost(c.limit)))
		target, met := "", (func(p50, b50 float64) bool)(nil)
		if c.confinedLimit > 0 {
			target, met = fmt.Sprintf("≤ %.2fx", c.confinedLimit), ratioAtMost(c.confinedLimit)
		}
		rows = append(rows, latencyRow(c.name+", against confined rg", lat, "rg as the worker runs it, confined", clat, target, met))
	}
	return rows, nil
}

// officialCommand is the official server's command line, or nil when node
// or the package is missing.
func officialCommand(dir, root string) []string {
	if dir == "" {
		return nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil
	}
	js := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	if _, err := os.Stat(js); err != nil {
		return nil
	}
	return []string{node, js, root}
}

// buildRevision builds cmd/fsmcp as of rev into tmp.
func buildRevision(rev, tmp string) (string, error) {
	src := filepath.Join(tmp, "src-"+rev)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", rev, src))
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %w", rev, err)
	}
	bin := filepath.Join(tmp, "fsmcp-"+rev)
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/fsmcp")
	build.Dir = src
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", rev, err)
	}
	return bin, nil
}

// tsClient is the official TypeScript SDK client: it calls one tool n
// times and prints the latencies in µs as JSON.
const tsClient = `
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
const [cmd, argsJSON, tool, toolArgsJSON, n] = process.argv.slice(2);
const client = new Client({ name: "ts-bench", version: "1" });
await client.connect(new StdioClientTransport({ command: cmd, args: JSON.parse(argsJSON), stderr: "ignore" }));
const toolArgs = JSON.parse(toolArgsJSON);
const lat = [];
for (let i = 0; i < Number(n) + 3; i++) {
  const t = process.hrtime.bigint();
  const res = await client.callTool({ name: tool, arguments: toolArgs });
  if (res.isError) { console.error(JSON.stringify(res)); process.exit(1); }
  if (i >= 3) lat.push(Number(process.hrtime.bigint() - t) / 1000);
}
console.log(JSON.stringify(lat));
await client.close();
`

func tsClientRows(o options, nodeDir, bin, root string, rounds int) ([]row, error) {
	script := filepath.Join(nodeDir, "fsmcp-ts-bench.mjs")
	if err := os.WriteFile(script, []byte(tsClient), 0o644); err != nil {
		return nil, err
	}
	js := officialCommand(nodeDir, root)
	n := max(o.samples/10, 5)
	if o.smoke {
		n, rounds = 3, 1
	}
	run := func(cmd string, args []string, tool string, targs map[string]any) ([]float64, error) {
		a, _ := json.Marshal(args)
		t, _ := json.Marshal(targs)
		out, err := exec.Command("node", script, cmd, string(a), tool, string(t), strconv.Itoa(n)).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return nil, fmt.Errorf("ts client %s: %v: %s", tool, err, ee.Stderr)
			}
			return nil, err
		}
		var lat []float64
		return lat, json.Unmarshal(out, &lat)
	}
	var rows []row
	for _, c := range []struct {
		tool string
		args map[string]any
		// official, when set, is the official tool to compare with.
		official string
	}{
		{"fs_stat", map[string]any{"path": "f4k"}, ""},
		{"fs_read", map[string]any{"path": "f4k"}, ""},
		{"fs_read", map[string]any{"path": "f1m"}, ""},
		{"fs_list", map[string]any{"path": "dir1000"}, ""},
		{"fs_list", map[string]any{"path": "dir1000"}, "list_directory_with_sizes"},
		{"fs_glob", map[string]any{"path": "", "pattern": "**/*.txt"}, ""},
	} {
		oname, oargs, _ := officialTool(c.tool, c.args, root)
		if c.official != "" {
			oname = c.official
		}
		var lat, blat []float64
		for range rounds {
			l, err := run(bin, []string{"--root", root, "--max-response-bytes", "2097152"}, c.tool, c.args)
			if err != nil {
				return nil, err
			}
			b, err := run(js[0], js[1:], oname, oargs)
			if err != nil {
				return nil, err
			}
			lat, blat = append(lat, l...), append(blat, b...)
		}
		slices.Sort(lat)
		slices.Sort(blat)
		rows = append(rows, latencyRow(fmt.Sprintf("TS SDK client %s %v", c.tool, c.args), lat, "official "+oname, blat, "≤ 1.00x", ratioAtMost(1)))
	}
	return rows, nil
}

// memoryUnderLoadRows: peak RSS of the front-end and the worker with
// 4,000 fs_read of 256 KiB sent at once, and with stdout unread for a
// while (40 s in the full run) by a client that keeps sending.
func memoryUnderLoadRows(o options, bins []struct{ name, bin string }, root string) ([]row, error) {
	calls, unread := 4000, 40*time.Second
	if o.smoke {
		calls, unread = 50, time.Second
	}
	var rows []row
	for _, b := range bins {
		front, worker, err := burstRSS(b.bin, root, calls)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		rows = append(rows, row{Name: fmt.Sprintf("peak RSS, %d fs_read 256 KiB in flight: %s", calls, b.name), Value: front + worker, Unit: "MiB",
			Baseline: fmt.Sprintf("front-end %.0f, worker %.0f", front, worker)})
		front, worker, sent, err := unreadRSS(b.bin, root, unread)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		rows = append(rows, row{Name: fmt.Sprintf("peak RSS, stdout unread %v: %s", unread, b.name), Value: front + worker, Unit: "MiB",
			Baseline: fmt.Sprintf("front-end %.0f, worker %.0f; %d calls sent", front, worker, sent)})
	}
	return rows, nil
}

func burstRSS(bin, root string, calls int) (front, worker float64, err error) {
	s, err := startRawServer("burst", []string{bin, "--root", root}, false, root)
	if err != nil {
		return 0, 0, err
	}
	defer s.close()
	var wg sync.WaitGroup
	var failed sync.Once
	var first error
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.tool("fs_read", map[string]any{"path": "f256k"}); err != nil && !answered(err) {
				failed.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	front, worker = peakRSS(s.cmd.Process.Pid)
	return front, worker, first
}

// unreadRSS sends fs_read calls for d without reading a reply, then
// reads everything.
func unreadRSS(bin, root string, d time.Duration) (front, worker float64, sent int, err error) {
	cmd := exec.Command(bin, "--root", root)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() { in.Close(); cmd.Wait() }()
	io.WriteString(in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	stop := time.Now().Add(d)
	var mu sync.Mutex
	go func() {
		for i := 1; time.Now().Before(stop); i++ {
			if _, err := fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fs_read","arguments":{"path":"f256k"}}}`+"\n", i); err != nil {
				return
			}
			mu.Lock()
			sent = i
			mu.Unlock()
		}
	}()
	time.Sleep(d)
	front, worker = peakRSS(cmd.Process.Pid)
	go io.Copy(io.Discard, out)
	mu.Lock()
	defer mu.Unlock()
	return front, worker, sent, nil
}

// answered tells a call refused or timed out under load, which the memory
// rows count as answered, from a failure of the harness.
func answered(err error) bool {
	return strings.Contains(err.Error(), `\"code\":\"unavailable\"`) || strings.Contains(err.Error(), `\"code\":\"timeout\"`)
}

// settle waits until the file name in root changed more than a second
// ago.
func settle(root, name string) error {
	fi, err := os.Stat(filepath.Join(root, name))
	if err != nil {
		return err
	}
	ctime := time.Unix(fi.Sys().(*syscall.Stat_t).Ctim.Unix())
	time.Sleep(time.Until(ctime.Add(1100 * time.Millisecond)))
	return nil
}
