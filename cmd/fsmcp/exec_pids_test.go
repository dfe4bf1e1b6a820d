package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// execPids is the attested pids bound of the command runner.
func (s *server) execPids() map[string]any {
	s.t.Helper()
	c := s.wantOK("fs_stat", map[string]any{"path": ""}).doc["confinement"].(map[string]any)["exec"].(map[string]any)
	p, ok := c["pids"].(map[string]any)
	if !ok {
		s.t.Fatalf("confinement.exec has no pids: %v", c)
	}
	return p
}

// cgroupValue reads one number of a pids cgroup file ("pids.current"), or
// one key of a keyed file ("pids.events" "max").
func cgroupValue(t *testing.T, dir, file, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if key != "" {
		v = ""
		for _, l := range strings.Split(string(b), "\n") {
			if k, n, _ := strings.Cut(l, " "); k == key {
				v = n
			}
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s/%s: %q", dir, file, b)
	}
	return n
}

// A fork bomb run as root inside fs_exec, which RLIMIT_NPROC does not
// bind, stays within the commands' pids cgroup: pids.current never passes
// pids.max while the kernel refuses forks (pids.events), the host forks
// meanwhile, the timeout kills the whole bomb, the runner still serves,
// and the cgroup is removed once fsmcp exits. The bound is small and the
// timeout short: the bomb never runs outside a bound.
func TestExecPidsForkBombBound(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the pids cgroup is what bounds root's commands; as another user RLIMIT_NPROC binds and creating a cgroup needs root")
	}
	const max = 48
	s := start(t, t.TempDir(), "--exec", "/bin/bash", "--exec-max-pids", strconv.Itoa(max))
	p := s.execPids()
	if p["controller"] == "none" {
		t.Skipf("no writable pids controller on this machine: %v", p["reason"])
	}
	dir, _ := p["cgroup"].(string)
	if p["max"] != float64(max) || !strings.HasPrefix(filepath.Base(dir), "fsmcp-exec.") ||
		cgroupValue(t, dir, "pids.max", "") != max {
		t.Fatalf("attested pids %v", p)
	}
	// Nothing runs yet: the runner itself is outside the cgroup.
	if n := cgroupValue(t, dir, "pids.current", ""); n != 0 {
		t.Fatalf("pids.current %d before any command", n)
	}
	var peak atomic.Int64
	done := make(chan struct{})
	sampled := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				sampled <- n
				return
			case <-time.After(10 * time.Millisecond):
			}
			if b, err := os.ReadFile(filepath.Join(dir, "pids.current")); err == nil {
				v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				if v > peak.Load() {
					peak.Store(v)
				}
				n++
			}
		}
	}()
	hostForked := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		hostForked <- exec.Command("/bin/true").Run()
	}()
	r := s.execCall(map[string]any{"argv": []string{"bash", "-c", "b() { b & b & wait; }; b"}, "timeout_s": 3, "max_bytes": 256})
	close(done)
	n := <-sampled
	if r.doc["timed_out"] != true || r.str("signal") != "SIGKILL" {
		t.Errorf("the bomb was not killed by the timeout: %s", r.text)
	}
	if err := <-hostForked; err != nil {
		t.Errorf("the host could not fork while the bomb ran: %v", err)
	}
	refused := cgroupValue(t, dir, "pids.events", "max")
	t.Logf("pids.max %d: peak pids.current %d over %d samples, %d forks refused", max, peak.Load(), n, refused)
	if peak.Load() > max || peak.Load() < max/2 {
		t.Errorf("peak pids.current %d, want between %d and pids.max %d", peak.Load(), max/2, max)
	}
	if refused == 0 {
		t.Error("pids.events counts no refused fork: the bomb never met the bound")
	}
	deadline := time.Now().Add(5 * time.Second)
	for cgroupValue(t, dir, "pids.current", "") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pids.current %d after the timeout", cgroupValue(t, dir, "pids.current", ""))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := s.execCall(map[string]any{"argv": []string{"bash", "-c", "echo ok"}}); r.str("stdout") != "ok\n" {
		t.Errorf("after the bomb: %s", r.text)
	}
	s.stdin.Close()
	s.wait(10 * time.Second)
	for deadline := time.Now().Add(12 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after fsmcp exited", dir)
		}
	}
}
