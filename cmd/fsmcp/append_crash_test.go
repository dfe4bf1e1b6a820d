package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// appendCrashChunk is what each trial appends: large enough that a kill
// lands inside the write.
const appendCrashChunk = 8 << 20

// TestEditAppendCrash SIGKILLs fsmcp's whole process group at random
// moments of a large fs_write append (in place, journalled in the state
// directory), restarts it, and checks that the file is exactly as it was
// or exactly fully appended, never torn, that an append reported done is
// there, and that the inode is the same throughout. Even trials kill
// anywhere in the call; odd ones wait for the append's record in the
// journal slot, which exists only while the bytes are being written, and
// kill inside the write.
// FSMCP_APPEND_CRASH_TRIALS sets the number of trials
// (scripts/crash-append runs the full count).
func TestEditAppendCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server per trial")
	}
	trials := envInt("FSMCP_APPEND_CRASH_TRIALS", 4)
	root := filepath.Join(t.TempDir(), "root")
	stateDir := filepath.Join(filepath.Dir(root), "state")
	flags := []string{"--state-dir", stateDir}
	p := filepath.Join(root, "log")
	cur := bytes.Repeat([]byte("first line of the log\n"), 1<<15)
	writeTree(t, root, map[string]string{"log": string(cur)})
	var ino uint64
	inode := func() uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	ino = inode()
	chunk := func(trial int) []byte {
		line := fmt.Sprintf("trial %04d appends this line\n", trial)
		return bytes.Repeat([]byte(line), appendCrashChunk/len(line))
	}
	args := func(trial int) map[string]any {
		return map[string]any{"path": "log", "content": string(chunk(trial)), "append": true, "if_sha256": sha(cur)}
	}
	s := start(t, root, flags...)
	began := time.Now()
	s.wantOK("fs_write", args(-1))
	whole := time.Since(began)
	s.session.Close()
	cur = append(cur, chunk(-1)...)
	if got := readFile(t, p); !bytes.Equal(got, cur) {
		t.Fatal("the calibrating append did not write what it was given")
	}
	t.Logf("seed %d, %d trials, one append of %d bytes takes %v", *crashSeed, trials, appendCrashChunk, whole)
	journals := stateSub(t, stateDir, root)
	var appended, unchanged, reportedOK, inWrite int
	for trial := range trials {
		if len(cur) > 48<<20 {
			// Keep the file bounded: cut it back while no server runs.
			cur = cur[:1<<20]
			if err := os.Truncate(p, int64(len(cur))); err != nil {
				t.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(*crashSeed, uint64(trial)+200))
		s := spawn(t, root, flags...)
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		connectWith(t, s, nil, "")
		a := args(trial)
		done := make(chan bool, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_write", Arguments: a})
			done <- err == nil && !res.IsError
		}()
		if trial%2 == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(whole * 3 / 2))))
		} else if waitAppendRecord(journals, 2*whole) {
			time.Sleep(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
		}
		if appendRecordOnDisk(journals) {
			inWrite++
		}
		if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatalf("trial %d: kill the process group: %v", trial, err)
		}
		ok := <-done
		s.session.Close()
		// The restart settles the journal before its first call.
		r := start(t, root, flags...)
		r.wantOK("fs_stat", map[string]any{"path": "log"})
		r.session.Close()
		got := readFile(t, p)
		full := append(bytes.Clone(cur), chunk(trial)...)
		switch {
		case bytes.Equal(got, full):
			appended++
			cur = full
		case ok:
			t.Fatalf("trial %d: the append was reported done, but the file holds %d bytes, not %d", trial, len(got), len(full))
		case bytes.Equal(got, cur):
			unchanged++
		default:
			t.Fatalf("trial %d: a torn append: %d bytes, want %d (as it was) or %d (fully appended)", trial, len(got), len(cur), len(full))
		}
		if ok {
			reportedOK++
		}
		if inode() != ino {
			t.Fatalf("trial %d: the file is another inode", trial)
		}
	}
	t.Logf("%d kills during appends: after each restart the file as it was (%d) or fully appended (%d), never torn; %d kills inside the write (its record in the journal slot); %d appends reported done before the kill",
		trials, unchanged, appended, inWrite, reportedOK)
	if trials >= 20 && (unchanged == 0 || appended == 0 || inWrite == 0) {
		t.Errorf("the kills do not cover the call: %d unchanged, %d appended, %d inside the write", unchanged, appended, inWrite)
	}
}

// appendRecordOnDisk reports whether an append slot in the state
// directory dir holds a record: an append is writing.
func appendRecordOnDisk(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "append-slot-") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		b := make([]byte, 1)
		n, _ := f.Read(b)
		f.Close()
		if n == 1 && b[0] != 0 {
			return true
		}
	}
	return false
}

// waitAppendRecord polls dir until an append record is on disk, at most
// for d.
func waitAppendRecord(dir string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Microsecond) {
		if appendRecordOnDisk(dir) {
			return true
		}
	}
	return false
}
