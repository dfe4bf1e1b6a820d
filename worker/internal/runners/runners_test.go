package runners

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunners: calls running at once each get a runner (none waits
// behind a busy one), an idle runner takes the next call, and stop ends
// them all.
func TestRunners(t *testing.T) {
	// Runners of an earlier test's stream end with it, soon after it.
	for deadline := time.Now().Add(10 * time.Second); running() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := running(); got != 0 {
		t.Fatalf("%d runners of an earlier stream still run", got)
	}
	r := New()
	const n = 8
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	for range n {
		r.Do(func() { started.Done(); release.Wait() })
	}
	waited := make(chan struct{})
	go func() { started.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d calls at once did not all start", n)
	}
	if got := running(); got != n {
		t.Fatalf("%d calls at once run on %d runners", n, got)
	}
	release.Done()
	for range 100 {
		// The runner that answered is back waiting before the next
		// call comes, as a call's round trip gives it time to be.
		time.Sleep(100 * time.Microsecond)
		done := make(chan struct{})
		r.Do(func() { close(done) })
		<-done
	}
	if got := running(); got != n {
		t.Fatalf("after 100 calls one at a time, %d runners, want the %d idle ones reused", got, n)
	}
	r.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for running() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := running(); got != 0 {
		t.Fatalf("after stop, %d runners remain", got)
	}
}

// running counts the goroutines running Runners.runner.
func running() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "runners.(*Runners).runner(")
}
