package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRewindCrash SIGKILLs fsmcp's whole process group (front-end and
// worker at once) at random moments while it rewinds a 12-file, 12 MiB
// change set, restarts it, and checks that the tree is wholly old or
// wholly new, that a rewind reported done is applied, and that no journal
// is left once the restarted worker has undone it. Each trial takes a
// checkpoint labelled with the tree's state and rewinds to the newest
// checkpoint of the other state. Even trials kill anywhere in the call;
// odd ones wait for the journal and kill inside the commit.
// FSMCP_REWIND_CRASH_TRIALS sets the number of trials (scripts/crash-rewind
// runs the full count).
func TestRewindCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server per trial")
	}
	trials := envInt("FSMCP_REWIND_CRASH_TRIALS", 4)
	base := t.TempDir()
	root, qdir, stateDir := filepath.Join(base, "root"), filepath.Join(base, "quarantine"), filepath.Join(base, "state")
	if err := os.Mkdir(qdir, 0o755); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--state-dir", stateDir, "--quarantine", qdir, "--quarantine-bytes", "1000000000"}
	rng := rand.New(rand.NewPCG(*crashSeed, 11))
	old, nw := patchCrashTree(t, root, rng)
	journals := stateSub(t, stateDir, root)

	// The new version, written through the tools after a checkpoint of
	// the old one; then a rewind back, timed.
	s := start(t, root, flags...)
	oldCP := s.wantOK("fs_checkpoint", map[string]any{"label": "old"}).str("id")
	for name, c := range nw {
		s.wantOK("fs_write", map[string]any{"path": name, "content": c, "if_sha256": sha([]byte(old[name]))})
	}
	s.wantOK("fs_checkpoint", map[string]any{"label": "new"})
	began := time.Now()
	s.wantOK("fs_rewind", map[string]any{"id": oldCP})
	whole := time.Since(began)
	s.session.Close()
	t.Logf("seed %d, %d trials, one rewind takes %v", *crashSeed, trials, whole)

	var changed, unchanged, inCommit, reportedOK int
	prev, before := "", ""
	tally := func(state string) {
		switch {
		case before == "":
		case state == before:
			unchanged++
		default:
			changed++
		}
		before = state
	}
	for trial := range trials {
		rng := rand.New(rand.NewPCG(*crashSeed, uint64(trial)+200))
		s := spawn(t, root, flags...)
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		connectWith(t, s, nil, "")
		state := patchCrashState(t, root, old, nw)
		if prev != "" && prev != state {
			t.Fatalf("trial %d: the rewind was reported done, but the tree is %s", trial, state)
		}
		if left := journalsLeft(journals); len(left) != 0 {
			t.Fatalf("trial %d: left in the state directory after recovery: %v", trial, left)
		}
		tally(state)
		other := map[string]string{"old": "new", "new": "old"}[state]
		s.wantOK("fs_checkpoint", map[string]any{"label": state})
		target := ""
		for _, c := range s.wantOK("fs_checkpoints", map[string]any{}).doc["checkpoints"].([]any) {
			if c := c.(map[string]any); c["label"] == other {
				target = c["id"].(string)
				break
			}
		}
		if target == "" {
			t.Fatalf("trial %d: no checkpoint of the %s tree is left", trial, other)
		}
		// The tools made every change since that checkpoint, recovery
		// included: the rewind sees no conflict.
		s.wantOK("fs_rewind", map[string]any{"id": target, "dry_run": true})
		hit, ok := killMidCall(t, s, trial, rng, whole, journals, "fs_rewind", map[string]any{"id": target})
		if hit {
			inCommit++
		}
		prev = ""
		if ok {
			reportedOK++
			prev = other
		}
	}
	s = start(t, root, flags...)
	final := patchCrashState(t, root, old, nw)
	if prev != "" && prev != final {
		t.Fatalf("the last rewind was reported done, but the tree is %s", final)
	}
	tally(final)
	waitSwept(t, root)
	noTempFiles(t, root)
	t.Logf("%d kills of the process group: after each restart every file old or every file new (%d unchanged, %d wholly rewound); %d kills inside the commit (journal on disk); %d rewinds reported done before the kill",
		trials, unchanged, changed, inCommit, reportedOK)
	if trials >= 20 && (unchanged == 0 || changed == 0 || inCommit == 0) {
		t.Errorf("the kills do not cover the call: %d unchanged, %d rewound, %d inside the commit", unchanged, changed, inCommit)
	}
}
