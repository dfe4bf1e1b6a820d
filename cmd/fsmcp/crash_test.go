package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	crashTrials = flag.Int("crash-trials", envInt("FSMCP_CRASH_TRIALS", 20), "SIGKILL trials of TestCrashDuringWrite (the long run uses 200 or more)")
	crashSeed   = flag.Uint64("crash-seed", uint64(envInt("FSMCP_CRASH_SEED", 1)), "seed of TestCrashDuringWrite's kill moments")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// workerPid finds the worker: the one child of the front-end process,
// listed under whichever of its threads forked it.
func workerPid(t *testing.T, frontend int) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", frontend))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(field)
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("front-end %d has children %v, want one worker", frontend, pids)
	}
	return pids[0]
}

// crashContent is size bytes of printable text drawn from rng, so that two
// versions differ throughout and a mix of them is always detected.
func crashContent(rng *rand.Rand, size int) []byte {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n"
	b := make([]byte, size)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return b
}

// TestCrashDuringWrite SIGKILLs the worker at seeded random moments while it
// writes a large file, then checks that the file holds exactly the old or
// exactly the new bytes, that a write reported as done is the new bytes,
// and that the next worker sweeps every temp file the crash left (checked
// on disk, where fs_list's hiding does not help) while fs_list shows
// exactly the expected names. -crash-trials (or FSMCP_CRASH_TRIALS) sets
// the number of trials; -crash-seed the seed.
func TestCrashDuringWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server per trial")
	}
	const size = crashFileSize
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(root, "big")
	rng := rand.New(rand.NewPCG(*crashSeed, 0))
	writeFile(t, big, crashContent(rng, size), 0o640)
	writeFile(t, filepath.Join(root, "small"), []byte("small\n"), 0o644)

	t.Logf("seed %d, %d trials, %d-byte file", *crashSeed, *crashTrials, size)
	var olds, news, leftovers, reportedOK int
	minWhole, maxWhole := time.Duration(math.MaxInt64), time.Duration(0)
	for trial := range *crashTrials {
		rng := rand.New(rand.NewPCG(*crashSeed, uint64(trial)+1))
		old := readFile(t, big)
		nw := crashContent(rng, size)
		s := start(t, root)
		// The previous trial's crash has been swept by this worker.
		waitSwept(t, root)
		r := s.wantOK("fs_list", map[string]any{"path": ""})
		if names := listNames(r); fmt.Sprint(names) != "[big small]" {
			t.Fatalf("trial %d: fs_list = %v", trial, names)
		}
		// Calibrate, in this trial, just before the kill, so that the
		// windows follow the machine's load as it is now: how long does one
		// whole write take, and how long from the moment its temp file
		// appears? The kill windows are half as long again.
		// Under load the poll can miss a short-lived temp file: then the
		// calibration is written again.
		var total, tempAt time.Duration
		var next []byte
		for attempt := 0; ; attempt++ {
			began := time.Now()
			written := make(chan struct{})
			next = crashContent(rng, size)
			go func() {
				defer close(written)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_write",
					Arguments: map[string]any{"path": "big", "content": string(next), "if_sha256": sha(old)}})
				if err != nil || res.IsError {
					t.Errorf("trial %d: the calibration write: %v %v", trial, err, res)
				}
			}()
			at, seen := waitTemp(root, time.Minute, written)
			<-written
			total, tempAt = time.Since(began), at
			if !bytes.Equal(readFile(t, big), next) {
				t.Fatalf("trial %d: the calibration write did not write", trial)
			}
			old = next
			if seen {
				break
			}
			if attempt == 10 {
				t.Fatalf("trial %d: no calibration write showed its temp file", trial)
			}
		}
		whole, tail := total*3/2, (total-tempAt)*3/2+time.Millisecond
		minWhole, maxWhole = min(minWhole, whole), max(maxWhole, whole)
		worker := workerPid(t, s.cmd.Process.Pid)
		type outcome struct {
			res *mcp.CallToolResult
			err error
		}
		done := make(chan outcome, 1)
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_write",
				Arguments: map[string]any{"path": "big", "content": string(nw), "if_sha256": sha(old)}})
			done <- outcome{res, err}
		}()
		// Even trials kill anywhere in the call; odd ones aim at the
		// worker's part: writing the temp file, fsync, rename, cleanup.
		var delay time.Duration
		if trial%2 == 0 {
			delay = time.Duration(rng.Int64N(int64(whole)))
			time.Sleep(delay)
		} else {
			at, _ := waitTemp(root, time.Minute, finished)
			delay = time.Duration(rng.Int64N(int64(tail)))
			time.Sleep(delay)
			delay += at
		}
		if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
			t.Fatalf("trial %d: kill worker: %v", trial, err)
		}
		o := <-done
		s.session.Close()
		got := readFile(t, big)
		switch {
		case bytes.Equal(got, old):
			olds++
		case bytes.Equal(got, nw):
			news++
		default:
			t.Fatalf("trial %d (kill after %v): the file holds neither the old nor the new bytes (%d bytes)", trial, delay, len(got))
		}
		if o.err == nil && !o.res.IsError {
			reportedOK++
			if !bytes.Equal(got, nw) {
				t.Fatalf("trial %d: the write was reported done, but the file holds the old bytes", trial)
			}
		}
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				leftovers++
			}
		}
	}
	// The last crash is swept too.
	s := start(t, root)
	waitSwept(t, root)
	if names := listNames(s.wantOK("fs_list", map[string]any{"path": ""})); fmt.Sprint(names) != "[big small]" {
		t.Fatalf("fs_list after the last trial = %v", names)
	}
	if got := readFile(t, filepath.Join(root, "small")); string(got) != "small\n" {
		t.Fatalf("small = %q", got)
	}
	t.Logf("%d trials: %d left the old bytes, %d the new (%d reported done); %d kills left a temp file, all swept; kill windows from %v to %v",
		*crashTrials, olds, news, reportedOK, leftovers, minWhole, maxWhole)
	if *crashTrials >= 20 && (olds == 0 || news == 0) {
		t.Errorf("every kill landed on the same side (old %d, new %d): the windows do not cover the write", olds, news)
	}
}

// waitTemp polls dir until a temp file appears in it, and reports how long
// that took; it gives up after limit, or once stop is ready.
func waitTemp[T any](dir string, limit time.Duration, stop <-chan T) (time.Duration, bool) {
	began := time.Now()
	for time.Since(began) < limit {
		select {
		case <-stop:
			return time.Since(began), false
		default:
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				return time.Since(began), true
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	return limit, false
}

func listNames(r reply) []string {
	var names []string
	entries, _ := r.doc["entries"].([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		n, _ := m["name"].(string)
		names = append(names, n)
	}
	return names
}

// waitSwept waits for the worker's background sweep to remove every temp
// file under dir, and fails if some remain after a minute (generous: the
// sweep runs beside the worker's start on a loaded machine).
func waitSwept(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		left := false
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			left = left || (err == nil && strings.HasPrefix(d.Name(), tempPrefix))
			return nil
		})
		if !left {
			return
		}
	}
	noTempFiles(t, dir)
}
