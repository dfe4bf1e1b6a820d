// Command benchmark measures a built fsmcp the way a client meets it: the
// go-sdk client over stdio (and Streamable HTTP), on a generated tree and
// on a Go source tree, and prints each figure next to a baseline measured
// in the same run (direct calls on an os.Root, raw rg, sha256sum), as a
// ratio, because the machines it runs on are shared and noisy.
//
// Run it through scripts/bench.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type options struct {
	json    bool
	smoke   bool
	bin     string
	gotree  string
	samples int
	spin    time.Duration
	// read: only the reading rows (lines, tree, grep modes, read_many).
	read bool
	// raw: only the raw-client rows against the official server.
	raw bool
	rawOptions
	// soak: run the mixed-load soak for this long instead (scripts/soak),
	// sampling every soakEvery.
	soak, soakEvery time.Duration
}

// row is one line of the report.
type row struct {
	Name     string  `json:"name"`
	P50us    float64 `json:"p50_us,omitempty"`
	P90us    float64 `json:"p90_us,omitempty"`
	P99us    float64 `json:"p99_us,omitempty"`
	Value    float64 `json:"value,omitempty"`
	Unit     string  `json:"unit,omitempty"`
	Baseline string  `json:"baseline,omitempty"`
	BaseP50  float64 `json:"baseline_p50_us,omitempty"`
	BaseVal  float64 `json:"baseline_value,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Target   string  `json:"target,omitempty"`
	Met      *bool   `json:"met,omitempty"`
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == confinedSubcommand {
		if err := confinedMain(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintf(os.Stderr, "confined rg: %v\n", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	flag.BoolVar(&o.smoke, "smoke", false, "a few samples of everything, to check the harness runs")
	flag.StringVar(&o.bin, "fsmcp", "", "fsmcp binary to measure (default: build ./cmd/fsmcp)")
	flag.StringVar(&o.gotree, "gotree", filepath.Join(goroot(), "src"), "source tree for the search benchmarks")
	flag.BoolVar(&o.read, "read", false, "only the rows of the reading tools (lines, tree, grep modes, several files)")
	flag.BoolVar(&o.raw, "raw", false, "only the raw-client rows: fsmcp against the official Node server (raw.go)")
	flag.StringVar(&o.before, "before", "", "with --raw: also build and measure this git revision, in the same rounds")
	flag.StringVar(&o.node, "node", os.Getenv("FSMCP_BENCH_NODE"), "with --raw: a directory whose node_modules hold @modelcontextprotocol/server-filesystem and @modelcontextprotocol/sdk")
	flag.BoolVar(&o.search, "search", false, "with --raw: only the Go-tree rows (fs_glob, fs_grep, fs_tree against rg, and rg under the worker's confinement)")
	flag.StringVar(&o.rows, "rows", "", "with --raw: only the raw-client rows whose name matches this regular expression (no search, TS-client or memory rows)")
	flag.BoolVar(&o.memory, "memory", false, "with --raw: only the memory rows (4,000 reads in flight, stdout unread)")
	flag.StringVar(&o.loop, "loop", "", "with --raw: call this tool (\"NAME ARGUMENTS-JSON\") on the generated tree --calls times, one at a time, and print each process's CPU per call (scripts/profile)")
	flag.IntVar(&o.calls, "calls", 20000, "with --loop: how many calls")
	flag.BoolVar(&o.coldStart, "cold-start", false, "with --raw: only the cold start (spawn to initialize answered) of this build and of --before, in turns")
	perfScript := flag.String("perf-shares", "", "read this `perf script` output and print, for the front-end and the worker, the share of samples under each of a list of functions (scripts/profile)")
	flag.DurationVar(&o.soak, "soak", 0, "run the mixed-load soak for this long and report RSS and descriptors over time")
	flag.DurationVar(&o.soakEvery, "soak-every", 30*time.Second, "how often the soak samples")
	flag.Parse()
	if *perfScript != "" {
		if err := perfShares(*perfScript, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "perf shares: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.soak > 0 {
		if err := soak(o); err != nil {
			fmt.Fprintf(os.Stderr, "soak: %v\n", err)
			os.Exit(1)
		}
		return
	}
	o.samples, o.spin = 300, 1500*time.Millisecond
	if o.smoke {
		o.samples, o.spin = 5, 100*time.Millisecond
	}
	rows, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchmark: %v\n", err)
		os.Exit(1)
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rows)
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tp50\tp90\tp99\tbaseline\tbaseline p50\tratio\ttarget\t")
	for _, r := range rows {
		met := ""
		if r.Met != nil {
			met = map[bool]string{true: " ok", false: " MISSED"}[*r.Met]
		}
		if r.Unit != "" {
			fmt.Fprintf(tw, "%s\t%.1f %s\t\t\t%s\t%s\t%s\t%s%s\t\n", r.Name, r.Value, r.Unit, r.Baseline,
				num(r.BaseVal, r.Unit), num(r.Ratio, "x"), r.Target, met)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\t\n", r.Name, us(r.P50us), us(r.P90us), us(r.P99us),
			r.Baseline, us(r.BaseP50), num(r.Ratio, "x"), r.Target, met)
	}
	tw.Flush()
}

func us(v float64) string {
	if v == 0 {
		return ""
	}
	if v >= 10000 {
		return fmt.Sprintf("%.1f ms", v/1000)
	}
	return fmt.Sprintf("%.0f µs", v)
}

func num(v float64, unit string) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

func goroot() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "/usr/local/go"
	}
	return strings.TrimSpace(string(out))
}

// sample runs f n times and returns its latencies in µs, sorted.
func sample(n int, f func() error) ([]float64, error) {
	lat := make([]float64, 0, n)
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	slices.Sort(lat)
	return lat, nil
}

func pct(lat []float64, q float64) float64 { return lat[int(q*float64(len(lat)-1))] }

func latencyRow(name string, lat []float64, baseline string, base []float64, target string, met func(p50, b50 float64) bool) row {
	r := row{Name: name, P50us: pct(lat, .5), P90us: pct(lat, .9), P99us: pct(lat, .99), Baseline: baseline, Target: target}
	if base != nil {
		r.BaseP50 = pct(base, .5)
		r.Ratio = r.P50us / r.BaseP50
	}
	if met != nil {
		m := met(r.P50us, r.BaseP50)
		r.Met = &m
	}
	return r
}

func ratioAtMost(x float64) func(p50, b50 float64) bool {
	return func(p50, b50 float64) bool { return p50 <= x*b50 }
}

// session is a running fsmcp with a connected client.
type session struct {
	cmd *exec.Cmd
	cs  *mcp.ClientSession
}

func startStdio(bin, root string, flags ...string) (*session, error) {
	cmd := exec.Command(bin, append([]string{"--root", root}, flags...)...)
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-bench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	return &session{cmd: cmd, cs: cs}, nil
}

// call calls a tool and decodes its JSON document; a tool error is an
// error here.
func (s *session) call(name string, args map[string]any) (map[string]any, error) {
	res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &doc); err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: %v", name, doc["error"])
	}
	return doc, nil
}

// peakRSS returns the peak RSS in MiB of pid and of its children.
func peakRSS(pid int) (front, worker float64) {
	front = vmHWM(pid)
	for _, c := range children(pid) {
		worker += vmHWM(c)
	}
	return front, worker
}

// children lists the child processes of pid (the worker; rg is the
// worker's child).
func children(pid int) []int {
	var pids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(c)
			pids = append(pids, n)
		}
	}
	return pids
}

// pss returns the proportional set size of pid in MiB: its private pages,
// plus each shared page divided by the number of processes mapping it. The
// front-end and the worker are one executable, so RSS counts its pages
// twice; the sum of their PSS counts them once.
func pss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// pssSampler records the peak of the front-end's and the worker's PSS
// together, sampled every 5 ms until stopped.
type pssSampler struct {
	stop chan struct{}
	done chan float64
}

func samplePSS(front, worker int) *pssSampler {
	p := &pssSampler{stop: make(chan struct{}), done: make(chan float64)}
	go func() {
		peak := 0.0
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, pss(front)+pss(worker))
			select {
			case <-p.stop:
				p.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *pssSampler) peak() float64 {
	close(p.stop)
	return <-p.done
}

func vmHWM(pid int) float64 { return statusMiB(pid, "VmHWM:") }

// statusMiB is the field key of /proc/pid/status, in MiB.
func statusMiB(pid int, key string) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func run(o options) ([]row, error) {
	tmp, err := os.MkdirTemp("", "fsmcp-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if o.bin == "" {
		o.bin = filepath.Join(tmp, "fsmcp")
		build := exec.Command("go", "build", "-trimpath", "-o", o.bin, "./cmd/fsmcp")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
	}
	if o.raw && o.search {
		return rawSearchRows(o, o.bin, 10)
	}
	root := filepath.Join(tmp, "root")
	bigSize := int64(512 << 20)
	if o.smoke {
		bigSize = 8 << 20
	}
	if err := generate(root, bigSize); err != nil {
		return nil, err
	}
	if o.read {
		return readRows(o, tmp)
	}
	if o.raw {
		return rawRows(o, o.rawOptions, tmp)
	}
	var rows []row

	// Cold start: spawn → initialize answered, worker and Landlock included.
	n := 30
	if o.smoke {
		n = 3
	}
	cold, err := sample(n, func() error {
		s, err := startStdio(o.bin, root)
		if err != nil {
			return err
		}
		return s.cs.Close()
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows, latencyRow("cold start to initialize", cold, "", nil, "≤ 60 ms",
		func(p50, _ float64) bool { return p50 <= 60000 }))

	s, err := startStdio(o.bin, root, "--max-response-bytes", "1048576")
	if err != nil {
		return nil, err
	}
	defer s.cs.Close()
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()

	more, err := toolRows(o, s, r)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)

	more, err = searchRows(o)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)

	more, err = readRows(o, tmp)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)

	more, err = throughputRows(o, root)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)
	if o.smoke {
		// The raw-client harness runs in the smoke too, so it never rots;
		// its figures come from scripts/bench --raw.
		more, err = rawRows(o, o.rawOptions, tmp)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	return rows, nil
}

// generate writes the bench tree: a 1,000-entry directory, 4 KiB, 256 KiB
// and 1 MiB text files, and a big file for hashing.
func generate(root string, bigSize int64) error {
	if err := os.MkdirAll(filepath.Join(root, "dir1000"), 0o755); err != nil {
		return err
	}
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(root, "dir1000", fmt.Sprintf("entry-%04d.txt", i)), []byte("x"), 0o644); err != nil {
			return err
		}
	}
	text := func(n int) []byte {
		return bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog 0123456789\n"), n/55+1)[:n]
	}
	for name, size := range map[string]int{"f4k": 4 << 10, "f256k": 256 << 10} {
		if err := os.WriteFile(filepath.Join(root, name), text(size), 0o644); err != nil {
			return err
		}
	}
	m := text(1 << 20)
	copy(m[len(m)/2:], "MARKER-A")
	if err := os.WriteFile(filepath.Join(root, "f1m"), m, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(root, "big"))
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := text(1 << 20)
	for written := int64(0); written < bigSize; written += int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			return err
		}
	}
	return f.Close()
}

func toolRows(o options, s *session, r *os.Root) ([]row, error) {
	var rows []row
	add := func(name string, server func() error, baseline string, base func() error, target string, met func(p50, b50 float64) bool) error {
		for range 5 { // warm up
			if err := server(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		lat, err := sample(o.samples, server)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var blat []float64
		if base != nil {
			if blat, err = sample(o.samples, base); err != nil {
				return fmt.Errorf("%s baseline: %w", name, err)
			}
		}
		rows = append(rows, latencyRow(name, lat, baseline, blat, target, met))
		return nil
	}
	hashFile := func(p string) error {
		if _, err := r.Lstat(p); err != nil {
			return err
		}
		f, err := r.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(sha256.New(), f)
		return err
	}
	if err := add("fs_stat 4 KiB", func() error { _, err := s.call("fs_stat", map[string]any{"path": "f4k"}); return err },
		"os.Root lstat+sha256", func() error { return hashFile("f4k") },
		"≤ baseline + 120 µs", func(p50, b50 float64) bool { return p50 <= b50+120 }); err != nil {
		return nil, err
	}
	if err := add("fs_list 1,000 entries", func() error { _, err := s.call("fs_list", map[string]any{"path": "dir1000"}); return err },
		"os.Root readdir+lstat", func() error {
			d, err := r.Open("dir1000")
			if err != nil {
				return err
			}
			defer d.Close()
			ents, err := d.ReadDir(-1)
			for _, e := range ents {
				e.Info()
			}
			return err
		}, "", nil); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		path string
		n    int
	}{{"fs_read 4 KiB", "f4k", 4 << 10}, {"fs_read 256 KiB", "f256k", 256 << 10}} {
		buf := make([]byte, c.n)
		if err := add(c.name, func() error {
			_, err := s.call("fs_read", map[string]any{"path": c.path, "length": c.n})
			return err
		}, "os.Root read", func() error {
			f, err := r.Open(c.path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.ReadAt(buf, 0)
			if err == io.EOF {
				err = nil
			}
			return err
		}, "", nil); err != nil {
			return nil, err
		}
	}

	// Writes alternate between two contents so each precondition holds.
	a, b := bytes.Repeat([]byte("a"), 4<<10), bytes.Repeat([]byte("b"), 4<<10)
	if _, err := s.call("fs_write", map[string]any{"path": "w4k", "content": string(a), "if_sha256": nil}); err != nil {
		return nil, err
	}
	cur := a
	if err := add("fs_write 4 KiB", func() error {
		next := b
		if bytes.Equal(cur, b) {
			next = a
		}
		_, err := s.call("fs_write", map[string]any{"path": "w4k", "content": string(next), "if_sha256": sha(cur)})
		cur = next
		return err
	}, "os.Root temp+fsync+rename", func() error { return directWrite(r, "d4k", a) }, "", nil); err != nil {
		return nil, err
	}
	m, err := r.ReadFile("f1m")
	if err != nil {
		return nil, err
	}
	from, to := "MARKER-A", "MARKER-B"
	if err := add("fs_replace 1 edit, 1 MiB", func() error {
		_, err := s.call("fs_replace", map[string]any{"path": "f1m", "if_sha256": sha(m),
			"edits": []map[string]any{{"old": from, "new": to}}})
		m = bytes.Replace(m, []byte(from), []byte(to), 1)
		from, to = to, from
		return err
	}, "os.Root read+replace+write", func() error {
		data, err := r.ReadFile("f1m")
		if err != nil {
			return err
		}
		return directWrite(r, "d1m", bytes.Replace(data, []byte("MARKER"), []byte("MARKER"), 1))
	}, "", nil); err != nil {
		return nil, err
	}

	// Hashing throughput: the first fs_stat of the big file against
	// sha256sum; then the same stat again, from the cache.
	fi, err := r.Stat("big")
	if err != nil {
		return nil, err
	}
	mib := float64(fi.Size()) / (1 << 20)
	t0 := time.Now()
	if _, err := s.call("fs_stat", map[string]any{"path": "big"}); err != nil {
		return nil, err
	}
	ours := mib / time.Since(t0).Seconds()
	t0 = time.Now()
	if out, err := exec.Command("sha256sum", filepath.Join(r.Name(), "big")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sha256sum: %v: %s", err, out)
	}
	theirs := mib / time.Since(t0).Seconds()
	met := ours >= 0.9*theirs
	rows = append(rows, row{Name: fmt.Sprintf("sha256 of %.0f MiB (fs_stat)", mib), Value: ours, Unit: "MiB/s",
		Baseline: "sha256sum", BaseVal: theirs, Ratio: ours / theirs, Target: "≥ 0.9x", Met: &met})
	// The file was written moments ago; the cache takes only settled files.
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.call("fs_stat", map[string]any{"path": "big"}); err != nil {
		return nil, err
	}
	if err := add(fmt.Sprintf("fs_stat %.0f MiB, unchanged", mib), func() error {
		_, err := s.call("fs_stat", map[string]any{"path": "big"})
		return err
	}, "", nil, "answered from the cache", nil); err != nil {
		return nil, err
	}
	return rows, nil
}

// directWrite is the cost floor of an atomic write: temp file, fsync,
// rename, directory fsync.
func directWrite(r *os.Root, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := r.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if err := r.Rename(tmp, name); err != nil {
		return err
	}
	d, err := r.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func searchRows(o options) ([]row, error) {
	s, err := startStdio(o.bin, o.gotree, "--read-only")
	if err != nil {
		return nil, err
	}
	defer s.cs.Close()
	n := o.samples / 15
	if n < 3 {
		n = 3
	}
	var rows []row
	raw := func(args ...string) func() error {
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
	for _, c := range []struct {
		name, tool string
		args       map[string]any
		baseline   string
		base       func() error
		limit      float64
	}{
		{"fs_glob *.go (Go tree)", "fs_glob", map[string]any{"path": "", "pattern": "*.go"}, "rg --files -g *.go", raw("--files", "-g", "*.go"), 1.2},
		{"fs_grep 'func Benchmark' (Go tree)", "fs_grep", map[string]any{"path": "", "pattern": "func Benchmark"}, "rg --json", raw("--json", "func Benchmark"), 1.15},
	} {
		server := func() error { _, err := s.call(c.tool, c.args); return err }
		server()
		c.base()
		// Interleave the two so drift on a shared machine hits both alike.
		var lat, blat []float64
		for range n {
			l, err := sample(1, server)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			b, err := sample(1, c.base)
			if err != nil {
				return nil, fmt.Errorf("%s baseline: %w", c.name, err)
			}
			lat, blat = append(lat, l...), append(blat, b...)
		}
		slices.Sort(lat)
		slices.Sort(blat)
		rows = append(rows, latencyRow(c.name, lat, c.baseline, blat, fmt.Sprintf("≤ %.2fx", c.limit), ratioAtMost(c.limit)))
	}
	front, worker := peakRSS(s.cmd.Process.Pid)
	rows = append(rows, row{Name: "peak RSS, search session (front-end + worker)", Value: front + worker, Unit: "MiB",
		Baseline: fmt.Sprintf("front-end %.1f, worker %.1f", front, worker)})
	return rows, nil
}

func throughputRows(o options, root string) ([]row, error) {
	var rows []row
	s, err := startStdio(o.bin, root)
	if err != nil {
		return nil, err
	}
	defer s.cs.Close()
	stat := func() error { _, err := s.call("fs_stat", map[string]any{"path": "f4k"}); return err }
	for _, inflight := range []int{1, 4, 16} {
		ops, err := spin(o.spin, inflight, stat)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{Name: fmt.Sprintf("fs_stat throughput, stdio, %d in flight", inflight), Value: ops, Unit: "calls/s"})
	}
	m, err := memoryRow(o, filepath.Join(filepath.Dir(root), "mem"))
	if err != nil {
		return nil, err
	}
	rows = append(rows, m)

	h, err := httpRows(o, root)
	if err != nil {
		return nil, err
	}
	return append(rows, h...), nil
}

// memoryRow measures the memory of one session, started with the default
// flags (so the default --max-response-bytes), that walks a 1 GiB text
// file in default-size pages while fs_grep searches a copy of the Go tree
// over and over. The walk reads every eighth page (each read is a whole
// page at the default bound; which pages are read does not change what one
// call holds), to keep the run short.
func memoryRow(o options, dir string) (row, error) {
	size, stride := int64(1<<30), int64(8)
	if o.smoke {
		size, stride = 16<<20, 8
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return row{}, err
	}
	// Hard links when the Go tree is on the same file system, else a
	// copy; the session is read-only either way.
	if out, err := exec.Command("cp", "-al", o.gotree, filepath.Join(dir, "go")).CombinedOutput(); err != nil {
		os.RemoveAll(filepath.Join(dir, "go"))
		if out, err := exec.Command("cp", "-a", o.gotree, filepath.Join(dir, "go")).CombinedOutput(); err != nil {
			return row{}, fmt.Errorf("copy the Go tree: %v: %s", err, out)
		}
	} else if len(out) > 0 {
		return row{}, fmt.Errorf("link the Go tree: %s", out)
	}
	f, err := os.Create(filepath.Join(dir, "walk"))
	if err != nil {
		return row{}, err
	}
	chunk := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog 0123456789\n"), (1<<20)/55+1)[:1<<20]
	for written := int64(0); written < size; written += int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return row{}, err
		}
	}
	if err := f.Close(); err != nil {
		return row{}, err
	}
	s, err := startStdio(o.bin, dir, "--read-only")
	if err != nil {
		return row{}, err
	}
	defer s.cs.Close()
	front := s.cmd.Process.Pid
	workers := children(front)
	if len(workers) != 1 {
		return row{}, fmt.Errorf("want one worker, found %v", workers)
	}
	sampler := samplePSS(front, workers[0])
	stop := make(chan struct{})
	grepped := make(chan error, 1)
	var greps int
	go func() {
		for {
			select {
			case <-stop:
				grepped <- nil
				return
			default:
			}
			if _, err := s.call("fs_grep", map[string]any{"pattern": "func Benchmark", "path": "go"}); err != nil {
				grepped <- err
				return
			}
			greps++
		}
	}()
	first, err := s.call("fs_read", map[string]any{"path": "walk"})
	if err != nil {
		close(stop)
		<-grepped
		return row{}, err
	}
	page := int64(first["length"].(float64))
	calls := 1
	for off := stride * page; off < size; off += stride * page {
		if _, err := s.call("fs_read", map[string]any{"path": "walk", "offset": off}); err != nil {
			close(stop)
			<-grepped
			return row{}, err
		}
		calls++
	}
	close(stop)
	if err := <-grepped; err != nil {
		return row{}, err
	}
	peak := sampler.peak()
	hf, hw := peakRSS(front)
	met := peak <= 40
	return row{Name: fmt.Sprintf("peak PSS, walking %d MiB + grepping the Go tree (front-end + worker)", size>>20),
		Value: peak, Unit: "MiB",
		Baseline: fmt.Sprintf("%d reads of %d KiB (default bound, every %dth page), %d greps; peak RSS front-end %.1f + worker %.1f",
			calls, page>>10, stride, greps, hf, hw),
		Target: "≤ 40 MiB", Met: &met}, nil
}

// spin runs f from n goroutines for d and returns completed calls per
// second.
func spin(d time.Duration, n int, f func() error) (float64, error) {
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := f(); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(t0).Seconds(), firstErr
}

// servingLine finds the address in the line an HTTP server prints when it
// listens; builds before 0.1.0 said "serving MCP at", which --fsmcp may
// name for a comparison.
var servingLine = regexp.MustCompile(`fsmcp[^:]*: serving .* (?:on|at) http://(\S+)/mcp`)

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// httpRows measures fs_stat throughput over Streamable HTTP with 1, 16
// and 256 concurrent sessions sharing one server.
func httpRows(o options, root string) ([]row, error) {
	tokenFile := filepath.Join(filepath.Dir(root), "token")
	const token = "benchmark-token-0123456789abcdef"
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(o.bin, "--root", root, "--transport", "http", "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var base string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := servingLine.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("http server did not start: %s", stderr.String())
		}
	}
	var rows []row
	for _, sessions := range []int{1, 16, 256} {
		var css []*session
		for range sessions {
			client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-bench", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
				HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
			if err != nil {
				return nil, err
			}
			defer cs.Close()
			css = append(css, &session{cs: cs})
		}
		var next atomic.Int64
		ops, err := spin(o.spin, sessions, func() error {
			s := css[int(next.Add(1))%len(css)]
			_, err := s.call("fs_stat", map[string]any{"path": "f4k"})
			return err
		})
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{Name: fmt.Sprintf("fs_stat throughput, HTTP, %d sessions", sessions), Value: ops, Unit: "calls/s"})
	}
	return rows, nil
}
