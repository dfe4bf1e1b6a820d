package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func robustSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// startAsNobody runs fsmcp on root as uid 65534 when the test runs as
// root (so that permission bits stop the server), from a copy of the test
// binary nobody can execute. It returns the server and the root.
func startAsNobody(t *testing.T, build func(root string)) (*server, string) {
	t.Helper()
	base := t.TempDir()
	exe := os.Args[0]
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		for d := base; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		exe = filepath.Join(base, "fsmcp.test")
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	root := filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	build(root)
	cmd := exec.Command(exe, "--root", root)
	if cred != nil {
		cmd.Args = append(cmd.Args, stateDirIn(t, base, int(cred.Uid), int(cred.Gid)))
	}
	cmd.Env = append(os.Environ(), "FSMCP_TEST_FRONTEND=1", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { session.Close() })
	return &server{t: t, cmd: cmd, session: session, stderr: stderr}, root
}

// Finding 4: rg's exit status 2 means "some error", which may be an
// unreadable file or the client's pattern. It is classified by running rg
// on no tree at all, never by words in its stderr: a .ignore file holding
// the malformed glob "x[" (rg warns about it on stderr) beside an
// unreadable file must not turn a search into invalid_argument, while a
// malformed pattern or glob of the client's still is.
func TestRobustSearchMalformedIgnoreFile(t *testing.T) {
	s, root := startAsNobody(t, func(root string) {
		for name, content := range map[string]string{".ignore": "x[\nskipped.txt\n", "open.txt": "needle\n",
			"locked.txt": "needle\n", "skipped.txt": "needle\n", "regex parse error.txt": "needle\n"} {
			if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(filepath.Join(root, "locked.txt"), 0); err != nil {
			t.Fatal(err)
		}
	})
	r := s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "needle"})
	var paths []string
	for _, l := range grepPage(t, r) {
		paths = append(paths, l.Path)
	}
	if strings.Join(paths, ",") != "open.txt,regex parse error.txt" || r.num("unreadable") != 1 {
		t.Errorf("fs_grep(needle) = %s, want open.txt and regex parse error.txt, 1 unreadable", r.text)
	}
	// A positive glob re-includes ignored files (rg's own semantics).
	files, last := globAll(t, s, map[string]any{"path": "", "pattern": "*.txt"}, 1<<20)
	if strings.Join(files, ",") != "locked.txt,open.txt,regex parse error.txt,skipped.txt" {
		t.Errorf("fs_glob(*.txt) = %q (%s)", files, last.text)
	}
	bad := s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "a("}, "invalid_argument")
	if !strings.Contains(bad.text, "a(") {
		t.Errorf("fs_grep(a() = %s, want rg's reason", bad.text)
	}
	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "needle", "glob": []string{"a["}}, "invalid_argument")
	s.wantErr("fs_glob", map[string]any{"path": "", "pattern": "a["}, "invalid_argument")
	noHostPath(t, r.text+last.text+bad.text, root)
}

// memoryCgroup makes a child memory cgroup of this process's own, limited
// to limit bytes, and returns its directory; it skips, saying why, where
// none can be made (not root, no writable cgroup hierarchy).
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no cgroups: %v", err)
	}
	var dir, file string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case strings.Contains(","+parts[1]+",", ",memory,"):
			dir, file = filepath.Join("/sys/fs/cgroup/memory", parts[2]), "memory.limit_in_bytes"
		case parts[0] == "0" && parts[1] == "" && dir == "":
			dir, file = filepath.Join("/sys/fs/cgroup", parts[2]), "memory.max"
		}
	}
	if dir == "" {
		t.Skip("no memory cgroup controller")
	}
	cg := filepath.Join(dir, fmt.Sprintf("fsmcp-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup (needs root and a writable hierarchy): %v", err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.Remove(cg) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(cg, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot limit the cgroup's memory: %v", err)
	}
	// cgroup v1 lets a group swap past its limit unless memsw is set too.
	os.WriteFile(filepath.Join(cg, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644)
	if v2, err := os.ReadFile(filepath.Join(cg, "memory.swap.max")); err == nil && len(v2) > 0 {
		os.WriteFile(filepath.Join(cg, "memory.swap.max"), []byte("0"), 0o644)
	}
	return cg
}

// startInCgroup starts fsmcp inside the cgroup cg (it enters it before
// exec, so the worker and rg are born inside).
func startInCgroup(t *testing.T, cg, root string, flags ...string) *server {
	t.Helper()
	s := spawn(t, root, flags...)
	args := s.cmd.Args
	s.cmd.Path = "/bin/sh"
	s.cmd.Args = append([]string{"sh", "-c", `echo $$ > "$FSMCP_TEST_CGROUP/cgroup.procs" && exec "$@"`, "sh"}, args...)
	s.cmd.Env = append(s.cmd.Env, "FSMCP_TEST_CGROUP="+cg)
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	session, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: s.stdin}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr.String())
	}
	s.session = session
	t.Cleanup(func() { session.Close() })
	return s
}

var maxFileLimit = regexp.MustCompile(`over the limit of (\d+) \(--max-file-bytes\)`)

// Finding 1 under a memory limit that makes it quick: fsmcp runs in a
// cgroup of 384 MiB, and its defaults follow from it. The edit that made
// the worker die of "out of memory" is too_large before allocation; the
// largest edit the bound allows is accepted and one byte more refused;
// edits that together would need several times the worker's budget run
// at once and all succeed or answer unavailable; and the next call is
// served by the same worker.
func TestRobustReplaceUnderMemoryLimit(t *testing.T) {
	cg := memoryCgroup(t, 384<<20)
	root := t.TempDir()
	s := startInCgroup(t, cg, root)
	pid := s.workerPid()
	s.wantOK("fs_write", map[string]any{"path": "f", "content": "a", "if_sha256": nil})
	big := strings.Repeat("b", 1_000_000)
	r := s.wantErr("fs_replace", map[string]any{"path": "f", "if_sha256": robustSum([]byte("a")), "edits": []map[string]any{
		{"old": "a", "new": big}, {"old": "b", "new": strings.Repeat("c", 1_000_000), "all": true}}}, "too_large")
	m := maxFileLimit.FindStringSubmatch(r.text)
	if m == nil {
		t.Fatalf("too_large without the bound: %s", r.text)
	}
	maxFile, _ := strconv.Atoi(m[1])
	t.Logf("--max-file-bytes under a 384 MiB cgroup: %d", maxFile)
	if got := string(readFile(t, filepath.Join(root, "f"))); got != "a" {
		t.Fatalf("f = %.20q after a refused replace", got)
	}

	// The largest edit allowed: a file of about maxFile/2 doubled by one
	// edit with all. The files are grown in the worker by doubling, so no
	// request is large.
	const block = "0123456789abcdef"
	blocks := maxFile / 2 / len(block)
	blocks -= blocks % 16
	half := strings.Repeat(block, blocks)
	const tail = "-tail-of-16-byte"
	over := half + tail
	if 2*len(half) > maxFile || 2*len(half)+len(tail) <= maxFile {
		t.Fatalf("the sizes %d and %d do not straddle %d", 2*len(half), 2*len(half)+len(tail), maxFile)
	}
	grow := func(name, tail string) {
		content := strings.Repeat(block, blocks/16)
		s.wantOK("fs_write", map[string]any{"path": name, "content": content + tail, "if_sha256": nil})
		for range 4 {
			s.wantOK("fs_replace", map[string]any{"path": name, "if_sha256": robustSum([]byte(content + tail)),
				"edits": []map[string]any{{"old": block, "new": block + block, "all": true}}})
			content += content
		}
	}
	grow("edge", "")
	grow("over", tail)
	if got := readFile(t, filepath.Join(root, "over")); len(got) != len(over) {
		t.Fatalf("over has %d bytes, want %d", len(got), len(over))
	}
	ok := s.wantOK("fs_replace", map[string]any{"path": "edge", "if_sha256": robustSum([]byte(half)),
		"edits": []map[string]any{{"old": block, "new": block + block, "all": true}}})
	if ok.num("size") != int64(2*len(half)) {
		t.Errorf("edge: size %d, want %d", ok.num("size"), 2*len(half))
	}
	s.wantErr("fs_replace", map[string]any{"path": "over", "if_sha256": robustSum([]byte(over)),
		"edits": []map[string]any{{"old": block, "new": block + block, "all": true}}}, "too_large")
	t.Logf("largest edit accepted: %d bytes; refused: %d bytes", 2*len(half), 2*len(half)+len(tail))

	// Eight edits of the largest size at once need far more than the
	// worker's budget: they queue for it.
	var wg sync.WaitGroup
	codes := make([]string, 8)
	for i := range codes {
		name := fmt.Sprintf("p%d", i)
		if err := os.WriteFile(filepath.Join(root, name), []byte(half), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.call("fs_replace", map[string]any{"path": name, "if_sha256": robustSum([]byte(half)),
				"edits": []map[string]any{{"old": block, "new": block + block, "all": true}}})
			codes[i] = r.code()
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != "" && c != "unavailable" {
			t.Errorf("parallel edit %d: %s, want ok or unavailable", i, c)
		}
	}
	t.Logf("parallel largest edits: %q", codes)
	s.wantOK("fs_stat", map[string]any{"path": "f"})
	if now := s.workerPid(); now != pid {
		t.Fatalf("the worker was replaced (%d, now %d)", pid, now)
	}
}

var (
	robustSearches = flag.Int("robust.searches", 60, "parallel searches of TestRobustSearchesBounded (the report uses 300)")
	robustMaxRG    = flag.Int("robust.max-rg", 3, "--max-rg of TestRobustSearchesBounded; 0 for fsmcp's default")
)

// processTree counts the rg processes among the worker's children and the
// tasks (threads) of the front-end, the worker and every rg.
func processTree(front, worker int) (rgs, tasks int) {
	threads := func(pid int) int {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
		return 0
	}
	tasks = threads(front) + threads(worker)
	for _, c := range childPids(worker) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(comm)) == "rg" {
			rgs++
			tasks += threads(c)
		}
	}
	return rgs, tasks
}

// Finding 5: parallel searches from one client start at most --max-rg rg
// processes; the others wait their turn (bounded by --queue-timeout) and
// every call is answered ok or unavailable. The peak of rg processes and
// of tasks (what systemd's TasksMax counts) is logged.
func TestRobustSearchesBounded(t *testing.T) {
	root := t.TempDir()
	line := strings.Repeat("the quick brown fox jumps over the lazy dog\n", 6000)
	for i := range 64 {
		p := filepath.Join(root, fmt.Sprintf("d%d/f%d.txt", i%8, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, []byte(line), 0o644)
	}
	var flags []string
	if *robustMaxRG > 0 {
		flags = append(flags, "--max-rg", strconv.Itoa(*robustMaxRG))
	}
	s := start(t, root, flags...)
	front, worker := s.cmd.Process.Pid, s.workerPid()
	stop := make(chan struct{})
	var peakRG, peakTasks int
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			rgs, tasks := processTree(front, worker)
			peakRG, peakTasks = max(peakRG, rgs), max(peakTasks, tasks)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	codes := make([]string, *robustSearches)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = s.call("fs_grep", map[string]any{"path": "", "pattern": "no such text anywhere"}).code()
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	close(stop)
	<-sampled
	count := map[string]int{}
	for _, c := range codes {
		count[c]++
	}
	t.Logf("%d parallel greps (--max-rg %d) in %v: peak %d rg processes, peak %d tasks; replies %v",
		len(codes), *robustMaxRG, elapsed, peakRG, peakTasks, count)
	if *robustMaxRG > 0 && peakRG > *robustMaxRG {
		t.Errorf("peak %d rg processes, want at most %d", peakRG, *robustMaxRG)
	}
	for c, n := range count {
		if c != "" && c != "unavailable" {
			t.Errorf("%d greps answered %s, want ok or unavailable", n, c)
		}
	}
	if peakRG == 0 {
		t.Error("no rg process was ever seen: the sampling saw nothing")
	}
}

// fdTargets lists what pid's descriptors name.
func fdTargets(pid int) []string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var out []string
	for _, e := range ents {
		if t, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err == nil {
			out = append(out, e.Name()+" -> "+t)
		}
	}
	return out
}

// Finding 10: a read-write descriptor on an outside file, inherited from
// the launcher (as fds 3, 4 and 5, none close-on-exec), is closed by the
// front-end before it starts the worker, and so reaches neither the
// worker nor rg; Landlock would not govern it.
func TestRobustInheritedDescriptorsClosed(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a.txt"), []byte("needle\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "outside-secret")
	f, err := os.OpenFile(outside, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := spawn(t, root, "--verbose")
	s.cmd.ExtraFiles = []*os.File{f, f, f}
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	session, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: s.stdin}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr.String())
	}
	s.session = session
	t.Cleanup(func() { session.Close() })
	s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "needle"})
	front, worker := s.cmd.Process.Pid, s.workerPid()
	for name, pid := range map[string]int{"front-end": front, "worker": worker} {
		for _, l := range fdTargets(pid) {
			if strings.Contains(l, outside) {
				t.Errorf("the %s holds the inherited descriptor %s", name, l)
			}
		}
	}
	// The test's own launcher may leave more open than these three.
	m := regexp.MustCompile(`fsmcp: closed (\d+) inherited descriptors`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		m = []string{"", "0"}
	}
	if n, _ := strconv.Atoi(m[1]); n < 3 {
		t.Errorf("the front-end did not report the descriptors it closed:\n%s", s.stderr.String())
	}
}

// Finding 4: fs_stat always hashed, so a 200 GiB file always timed out
// and its type and size could not be had. hash: false reads no content
// and answers at once; with a progress token a hash reports the bytes
// read every ~250 ms until the call's deadline stops it.
func TestRobustStatHugeFile(t *testing.T) {
	root := t.TempDir()
	huge := filepath.Join(root, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	const size = 200 << 30
	if err := f.Truncate(size); err != nil {
		t.Skipf("no sparse 200 GiB file here: %v", err)
	}
	f.Close()
	var mu sync.Mutex
	var notes []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			notes = append(notes, req.Params)
			mu.Unlock()
		},
	})
	cmd := fsmcpCommand(root, "--call-timeout", "1500ms")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer session.Close()
	s := &server{t: t, cmd: cmd, session: session, stderr: stderr}

	r := s.wantOK("fs_stat", map[string]any{"path": "huge", "hash": false})
	if r.num("size") != size || r.str("type") != "file" || r.str("sha256") != "" {
		t.Errorf("fs_stat(huge, hash: false) = %s", r.text)
	}
	params := &mcp.CallToolParams{Name: "fs_stat", Arguments: map[string]any{"path": "huge"}}
	params.SetProgressToken("hash-1")
	res, err := session.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r := checkReply(t, "fs_stat", res); r.code() != "timeout" {
		t.Errorf("fs_stat(huge) = %s, want timeout", r.text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notes) == 0 {
		t.Fatal("a 1.5 s hash sent no progress notification")
	}
	last := notes[len(notes)-1]
	if last.ProgressToken != "hash-1" || last.Progress <= 0 || !strings.Contains(last.Message, fmt.Sprintf("of %d bytes hashed", int64(size))) {
		t.Errorf("last progress %+v", last)
	}
	t.Logf("%d progress notifications; last: %s", len(notes), last.Message)
}

// Finding 9: a root deleted under the server was served with inconsistent
// codes (fs_stat "" ok with nlink 0, grep internal, writes not_found).
// Every call is now unavailable with one reason, and /health says so.
func TestRobustRootDeleted(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	writeFile(t, filepath.Join(base, "keep"), nil, 0o644)
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "d", "f"), []byte("needle\n"), 0o644)
	h := startHTTP(t, root)
	s := h.connect("")
	health := func() (int, string) {
		resp, err := http.Get(h.base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := health(); code != 200 {
		t.Fatalf("/health = %d %s before the deletion", code, body)
	}
	s.wantOK("fs_stat", map[string]any{"path": "d/f"})
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]map[string]any{
		"fs_stat":  {"path": ""},
		"fs_list":  {"path": ""},
		"fs_read":  {"path": "d/f"},
		"fs_grep":  {"path": "", "pattern": "needle"},
		"fs_glob":  {"path": "", "pattern": "*"},
		"fs_write": {"path": "new", "content": "x", "if_sha256": nil},
		"fs_mkdir": {"path": "d2"},
	} {
		r := s.wantErr(name, args, "unavailable")
		if !strings.Contains(r.text, "deleted") {
			t.Errorf("%s = %s, want the reason", name, r.text)
		}
		noHostPath(t, r.text, base)
	}
	code, body := health()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"unavailable"`) || !strings.Contains(body, "deleted") {
		t.Errorf("/health = %d %s after the deletion, want 503 unavailable with the reason", code, body)
	}
	if _, err := os.Lstat(filepath.Join(base, "new")); !os.IsNotExist(err) {
		t.Errorf("a write landed beside the deleted root: %v", err)
	}
}

// cpuTicks is the user and system CPU time of pid, in clock ticks.
func cpuTicks(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	k, _ := strconv.ParseInt(fields[12], 10, 64)
	return u + k
}

// Finding 2 end to end: 400 alternating all-edits of a 16 MiB file under
// --call-timeout 1s answer timeout, and the worker stops burning CPU right
// after; the time from the reply to the worker going idle (no CPU tick for
// 100 ms) is logged. The bound asserted is generous, for loaded machines.
func TestRobustDeadlineToIdle(t *testing.T) {
	root := t.TempDir()
	content := strings.Repeat("x", 16<<20)
	writeFile(t, filepath.Join(root, "f"), []byte(content), 0o644)
	s := start(t, root, "--call-timeout", "1s")
	worker := s.workerPid()
	var edits []map[string]any
	for i := range 400 {
		from, to := "x", "y"
		if i%2 == 1 {
			from, to = to, from
		}
		edits = append(edits, map[string]any{"old": from, "new": to, "all": true})
	}
	began := time.Now()
	s.wantErr("fs_replace", map[string]any{"path": "f", "if_sha256": robustSum([]byte(content)), "edits": edits}, "timeout")
	replied := time.Now()
	last, lastTick := cpuTicks(worker), time.Now()
	for time.Since(lastTick) < 100*time.Millisecond {
		time.Sleep(5 * time.Millisecond)
		if now := cpuTicks(worker); now != last {
			last, lastTick = now, time.Now()
		}
		if time.Since(replied) > 30*time.Second {
			t.Fatal("the worker kept burning CPU for 30 s after the timeout")
		}
	}
	idle := lastTick.Sub(replied)
	t.Logf("reply after %v; worker idle %v after the reply (CPU ticks are 10 ms)", replied.Sub(began), idle.Round(time.Millisecond))
	if idle > 2*time.Second {
		t.Errorf("the worker went idle %v after the timeout, want milliseconds", idle)
	}
	if got := readFile(t, filepath.Join(root, "f")); string(got) != content {
		t.Error("the file changed after a timed-out replace")
	}
}

// fs_view reserves the file's two copies in the worker (as read and as
// encoded) from its memory budget: with --worker-memory 64 MiB (a 32 MiB
// budget), a 17 MiB file is too_large unread, naming the budget; eight
// concurrent views of a 12 MiB file take turns instead of all allocating,
// so the worker's peak memory stays near one view's, and every one is
// answered (unsupported: the bytes are no picture, which the front-end
// judges after the worker read them).
func TestRobustViewBudgetEndToEnd(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big"), make([]byte, 17<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pic"), make([]byte, 12<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// A queue timeout long enough for eight views one after another on a
	// loaded machine: none is refused for waiting.
	s := start(t, root, "--worker-memory", strconv.Itoa(64<<20), "--max-media-bytes", strconv.Itoa(20<<20),
		"--queue-timeout", "2m", "--call-timeout", "3m")
	r := s.wantErr("fs_view", map[string]any{"path": "big"}, "too_large")
	if !strings.Contains(r.text, "memory budget") {
		t.Errorf("view of 17 MiB with a 32 MiB budget: %s, want too_large naming the memory budget", r.text)
	}
	s.wantErr("fs_view", map[string]any{"path": "pic"}, "unsupported")
	one := peakRSS(t, s.workerPid()) >> 10
	t.Logf("worker peak RSS after one 12 MiB view: %d MiB", one)
	results := make(chan *mcp.CallToolResult, 8)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_view", Arguments: map[string]any{"path": "pic"}})
			results <- res
			errs <- err
		}()
	}
	for range 8 {
		res, err := <-results, <-errs
		if err != nil {
			t.Fatalf("fs_view: %v", err)
		}
		if r := checkReply(t, "fs_view", res); r.code() != "unsupported" {
			t.Errorf("fs_view of 12 MiB of zeros: %s, want unsupported", r.text)
		}
	}
	// One view holds 24 MiB at most; eight at once would hold 192 (168 to
	// 192 MiB measured with the reservation removed, 84 with it). The
	// race detector's shadow memory, which the soft limit does not cover,
	// hides the difference: scripts/test.sh runs this test once more
	// without it.
	worker := peakRSS(t, s.workerPid()) >> 10
	t.Logf("worker peak RSS after eight concurrent 12 MiB views: %d MiB", worker)
	if raceEnabled {
		t.Log("race detector on: the peak RSS is not judged")
	} else if worker > 64+48 {
		t.Errorf("worker peak RSS %d MiB after eight concurrent 12 MiB views (%d after one), want within --worker-memory 64 MiB and 48 MiB of runtime", worker, one)
	}
}

// pidsCgroup makes a cgroup-v1 pids cgroup under this process's own and
// removes it when the test ends, moving whatever is still in it back
// first. It skips, saying why, where no writable pids controller exists
// (cgroup v2 hosts without it delegated, containers without cgroupfs).
func pidsCgroup(t *testing.T) (cg, parent string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no cgroups: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && strings.Contains(","+parts[1]+",", ",pids,") {
			parent = filepath.Join("/sys/fs/cgroup/pids", parts[2])
		}
	}
	if parent == "" {
		t.Skip("no cgroup-v1 pids controller to limit the worker's tasks with (as root, RLIMIT_NPROC does not bind)")
	}
	cg = filepath.Join(parent, fmt.Sprintf("fsmcp-test-pids-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot make a pids cgroup (needs root and a writable hierarchy): %v", err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(cg, "pids.max"), []byte("max"), 0o644)
		for range 100 {
			procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			for _, pid := range strings.Fields(string(procs)) {
				os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(pid), 0o644)
			}
			if os.Remove(cg) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("cannot remove the cgroup %s", cg)
	})
	return cg, parent
}

func cgroupFile(t *testing.T, cg, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func setCgroupFile(t *testing.T, cg, name, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg, name), []byte(value), 0o644); err != nil {
		t.Fatalf("%s = %s: %v", name, value, err)
	}
}

// Finding 9: EAGAIN from a process limit, here a pids cgroup holding the
// worker at its current task count, is transient: fs_grep, whose rg
// cannot be started, answers unavailable with the reason, never internal;
// the same worker goes on answering, and once the limit is raised the
// next fs_grep succeeds.
func TestRobustTaskLimitIsUnavailable(t *testing.T) {
	cg, _ := pidsCgroup(t)
	root, _ := tree(t)
	s := start(t, root)
	worker := s.workerPid()
	// Idle threads for the Go runtime to reuse: under the limit it can
	// start no new one (and would abort if it had to).
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_grep", Arguments: map[string]any{"path": "", "pattern": "hello"}})
		}()
	}
	wg.Wait()
	// cgroup.procs moves the whole thread group, every thread of it.
	setCgroupFile(t, cg, "cgroup.procs", strconv.Itoa(worker))
	current := cgroupFile(t, cg, "pids.current")
	threads, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", worker))
	if current != strconv.Itoa(len(threads)) {
		t.Fatalf("the cgroup counts %s tasks, the worker has %d threads", current, len(threads))
	}
	setCgroupFile(t, cg, "pids.max", current)

	r := s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "hello"}, "unavailable")
	if !strings.Contains(r.text, "cannot start rg") || !strings.Contains(r.text, "resource temporarily unavailable") {
		t.Errorf("fs_grep with no task to spare: %s, want unavailable saying rg could not start and why", r.text)
	}
	if got := cgroupFile(t, cg, "pids.events"); !strings.HasPrefix(got, "max ") || got == "max 0" {
		t.Errorf("pids.events %q: the limit never refused a fork", got)
	}
	s.wantOK("fs_stat", map[string]any{"path": "a.txt"})

	setCgroupFile(t, cg, "pids.max", "max")
	r = s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "hello"})
	if r.num("matches") == 0 {
		t.Errorf("fs_grep once the limit is raised: %s", r.text)
	}
	if w := s.workerPid(); w != worker {
		t.Errorf("the worker is %d, was %d: it did not survive the limit", w, worker)
	}
}
