package main

import (
	"context"
	"fmt"
	"io/fs"
	stdmaps "maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// patchCrashFiles is how many files the crash trial's patch changes, each
// patchCrashFileSize bytes: 12 MiB in all.
const (
	patchCrashFiles    = 12
	patchCrashFileSize = 1 << 20
)

// patchCrashTree writes version v (0 or 1) of the trial's files into dir:
// versions differ in three lines of each file, at its start, middle and
// end.
func patchCrashTree(t *testing.T, dir string, rng *rand.Rand) (old, nw map[string]string) {
	old, nw = map[string]string{}, map[string]string{}
	for i := range patchCrashFiles {
		name := fmt.Sprintf("d%d/f%02d.txt", i%3, i)
		var b strings.Builder
		for n := 0; b.Len() < patchCrashFileSize; n++ {
			fmt.Fprintf(&b, "%s line %07d %016x\n", name, n, rng.Uint64())
		}
		lines := strings.SplitAfter(b.String(), "\n")
		o := strings.Join(lines, "")
		for _, at := range []int{1, len(lines) / 2, len(lines) - 3} {
			lines[at] = "CHANGED " + lines[at]
		}
		old[name], nw[name] = o, strings.Join(lines, "")
	}
	writeTree(t, dir, old)
	return old, nw
}

// patchCrashOnlyOld and patchCrashOnlyNew are the files only one version
// has: the patch from old to new deletes the first (leaving gone0/,
// gone1/sub/ and gone1/ empty, so they go, while d0/ keeps its other
// files) and creates the second (in made/, made/a/b/ and d1/new/, which it
// makes). The patch back does the opposite.
var (
	patchCrashOnlyOld = map[string]string{"gone0/x.txt": "x\n", "gone1/sub/x.txt": "x\ny\n", "d0/extra.txt": "extra\n"}
	patchCrashOnlyNew = map[string]string{"made/a/b/y.txt": "y\n", "made/z.txt": "z\nz\n", "d1/new/w.txt": "w\n"}
)

// wholeFilePatch deletes every file of from and creates every file of to,
// as diff -u writes it with /dev/null on the other side.
func wholeFilePatch(from, to map[string]string) string {
	var b strings.Builder
	for _, side := range []struct {
		files  map[string]string
		create bool
	}{{from, false}, {to, true}} {
		for _, name := range slices.Sorted(stdmaps.Keys(side.files)) {
			lines := strings.SplitAfter(side.files[name], "\n")
			lines = lines[:len(lines)-1]
			if side.create {
				fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", name, len(lines))
			} else {
				fmt.Fprintf(&b, "--- a/%s\n+++ /dev/null\n@@ -1,%d +0,0 @@\n", name, len(lines))
			}
			for _, l := range lines {
				b.WriteString(map[bool]string{true: "+", false: "-"}[side.create] + l)
			}
		}
	}
	return b.String()
}

// envelopePatch is the *** Begin Patch envelope from from to to: an
// update per file both hold, one chunk per line that differs (files of the
// same line count); a deletion per file only from holds and an added file
// per file only to holds.
func envelopePatch(from, to map[string]string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	for _, name := range slices.Sorted(stdmaps.Keys(from)) {
		nw, ok := to[name]
		if !ok {
			fmt.Fprintf(&b, "*** Delete File: %s\n", name)
			continue
		}
		if nw == from[name] {
			continue
		}
		fmt.Fprintf(&b, "*** Update File: %s\n", name)
		ol, nl := strings.Split(from[name], "\n"), strings.Split(nw, "\n")
		for i := range ol {
			if ol[i] != nl[i] {
				fmt.Fprintf(&b, "@@\n-%s\n+%s\n", ol[i], nl[i])
			}
		}
	}
	for _, name := range slices.Sorted(stdmaps.Keys(to)) {
		if _, ok := from[name]; ok {
			continue
		}
		fmt.Fprintf(&b, "*** Add File: %s\n", name)
		for _, l := range strings.SplitAfter(to[name], "\n") {
			if l != "" {
				b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
			}
		}
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// patchCrashState says whether the tree (its files, their contents and its
// directories, temp names aside) is wholly the old version or wholly the
// new one.
func patchCrashState(t *testing.T, root string, old, nw map[string]string) string {
	t.Helper()
	files, dirs := map[string]string{}, map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		switch {
		case err != nil:
			t.Fatal(err)
		case strings.HasPrefix(d.Name(), tempPrefix):
		case d.IsDir() && rel != ".":
			dirs[rel] = true
		case d.Type().IsRegular():
			files[rel] = string(readFile(t, p))
		}
		return nil
	})
	for _, v := range []struct {
		name  string
		files map[string]string
	}{{"old", old}, {"new", nw}} {
		want := map[string]bool{}
		for n := range v.files {
			for d := filepath.Dir(n); d != "."; d = filepath.Dir(d) {
				want[d] = true
			}
		}
		if stdmaps.Equal(files, v.files) && stdmaps.Equal(dirs, want) {
			return v.name
		}
	}
	olds, news := 0, 0
	for n, c := range files {
		switch c {
		case old[n]:
			olds++
		case nw[n]:
			news++
		}
	}
	t.Fatalf("a mixed tree: %d files old, %d new, %d files in all; directories %v", olds, news, len(files), slices.Sorted(stdmaps.Keys(dirs)))
	return ""
}

// TestEditPatchCrash SIGKILLs fsmcp's whole process group (front-end and
// worker at once) at random moments while it applies a 12-file, 12 MiB
// patch (which also creates files in directories it makes and deletes
// files from directories it removes), restarts it, and checks that the
// tree is wholly old or wholly new, directories included, that a patch
// reported done is applied, and that no temp name or journal is left on
// disk once the restarted worker has undone and swept. The journals are
// in the state directory, and every one a kill leaves verifies: none is
// set aside. Even trials kill anywhere in the call; odd ones wait
// for the journal, which exists only while files are being placed, and
// kill inside the commit. Every other pair of trials sends the same change
// as a *** Begin Patch envelope. FSMCP_PATCH_CRASH_TRIALS sets the number of
// trials (scripts/crash-patch runs the full count). The trial runs twice:
// plain, and with --quarantine, where the commit also moves the old
// versions into the quarantine: there, after every restart that finds the
// patch applied, the quarantine holds every file's old version, and after
// one that finds it undone, nothing of the killed patch stays in it.
func TestEditPatchCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server per trial")
	}
	t.Run("plain", func(t *testing.T) { patchCrashTrials(t, false) })
	t.Run("quarantine", func(t *testing.T) { patchCrashTrials(t, true) })
}

func patchCrashTrials(t *testing.T, quarantine bool) {
	trials := envInt("FSMCP_PATCH_CRASH_TRIALS", 4)
	root := filepath.Join(t.TempDir(), "root")
	stateDir := filepath.Join(filepath.Dir(root), "state")
	flags := []string{"--state-dir", stateDir}
	qdir := filepath.Join(filepath.Dir(root), "quarantine")
	if quarantine {
		if err := os.Mkdir(qdir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Room for five patches' old versions: eviction runs too.
		flags = append(flags, "--quarantine", qdir, "--quarantine-bytes", fmt.Sprint(5*patchCrashFiles*patchCrashFileSize))
	}
	rng := rand.New(rand.NewPCG(*crashSeed, 7))
	old, nw := patchCrashTree(t, root, rng)
	journals := stateSub(t, stateDir, root)
	scratch := t.TempDir()
	writeTree(t, filepath.Join(scratch, "a"), old)
	writeTree(t, filepath.Join(scratch, "b"), nw)
	forward := string(run(t, scratch, []int{1}, "diff", "-ru", "a", "b")) + wholeFilePatch(patchCrashOnlyOld, patchCrashOnlyNew)
	backward := string(run(t, scratch, []int{1}, "diff", "-ru", "b", "a")) + wholeFilePatch(patchCrashOnlyNew, patchCrashOnlyOld)
	writeTree(t, root, patchCrashOnlyOld)
	stdmaps.Copy(old, patchCrashOnlyOld)
	stdmaps.Copy(nw, patchCrashOnlyNew)
	pre := func(from map[string]string) map[string]any {
		m := map[string]any{}
		for n, c := range from {
			m[n] = sha([]byte(c))
		}
		for _, other := range []map[string]string{old, nw} {
			for n := range other {
				if _, ok := from[n]; !ok {
					m[n] = nil
				}
			}
		}
		return m
	}
	args := map[string]map[string]any{
		"old": {"patch": forward, "if_sha256": pre(old)},
		"new": {"patch": backward, "if_sha256": pre(nw)},
	}
	envArgs := map[string]map[string]any{
		"old": {"patch": envelopePatch(old, nw), "if_sha256": pre(old)},
		"new": {"patch": envelopePatch(nw, old), "if_sha256": pre(nw)},
	}
	// Calibrate: one whole patch, then back.
	s := start(t, root, flags...)
	began := time.Now()
	s.wantOK("fs_patch", args["old"])
	whole := time.Since(began)
	s.wantOK("fs_patch", args["new"])
	if r := s.wantOK("fs_patch", envArgs["old"]); !strings.Contains(r.text, `"format":"envelope"`) {
		t.Fatalf("the envelope was not read as one: %.300s", r.text)
	}
	s.wantOK("fs_patch", envArgs["new"])
	s.session.Close()
	t.Logf("seed %d, %d trials, one patch takes %v", *crashSeed, trials, whole)

	var applied, unchanged, inCommit, reportedOK int
	prev, before := "", ""
	kept := 0
	// tally compares the tree after a restart with the one before the
	// killed patch, and with a quarantine checks what it holds.
	tally := func(state string) {
		if quarantine {
			held := quarantineContents(t, qdir)
			if before != "" && state != before {
				versions := map[string]map[string]string{"old": old, "new": nw}[before]
				for name, c := range versions {
					if !held[sha([]byte(c))] {
						t.Fatalf("the patch was applied, and the quarantine lacks the version of %s it replaced", name)
					}
				}
			}
			if before != "" && state == before && len(held) > kept {
				t.Fatalf("the killed patch was undone, and the quarantine grew from %d to %d files", kept, len(held))
			}
			kept = len(held)
		}
		switch {
		case before == "":
		case state == before:
			unchanged++
		default:
			applied++
		}
	}
	for trial := range trials {
		rng := rand.New(rand.NewPCG(*crashSeed, uint64(trial)+100))
		s := spawn(t, root, flags...)
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		connectWith(t, s, nil, "")
		// The previous kill has been undone before the first call.
		state := patchCrashState(t, root, old, nw)
		if prev != "" && prev != state {
			t.Fatalf("trial %d: the patch was reported done, but the tree is %s", trial, state)
		}
		tally(state)
		before = state
		waitSwept(t, root)
		a := args[state]
		if trial%4 >= 2 {
			a = envArgs[state]
		}
		hit, ok := killMidCall(t, s, trial, rng, whole, journals, "fs_patch", a)
		if hit {
			inCommit++
		}
		prev = ""
		if ok {
			reportedOK++
			prev = map[string]string{"old": "new", "new": "old"}[state]
		}
	}
	s = start(t, root, flags...)
	state := patchCrashState(t, root, old, nw)
	if prev != "" && prev != state {
		t.Fatalf("the last patch was reported done, but the tree is %s", state)
	}
	tally(state)
	waitSwept(t, root)
	noTempFiles(t, root)
	if left := journalsLeft(journals); len(left) != 0 {
		t.Errorf("left in the state directory after recovery (set-aside/ holds a journal that did not verify): %v", left)
	}
	top := map[string]bool{}
	for n := range map[string]map[string]string{"old": old, "new": nw}[state] {
		top[strings.SplitN(n, "/", 2)[0]] = true
	}
	if names := listNames(s.wantOK("fs_list", map[string]any{"path": ""})); fmt.Sprint(names) != fmt.Sprint(slices.Sorted(stdmaps.Keys(top))) {
		t.Fatalf("fs_list after the trials = %v, want %v", names, slices.Sorted(stdmaps.Keys(top)))
	}
	t.Logf("quarantine %v: %d kills of the process group: after each restart every file old or every file new (%d unchanged, %d wholly patched); %d kills inside the commit (journal on disk); %d patches reported done before the kill",
		quarantine, trials, unchanged, applied, inCommit, reportedOK)
	if trials >= 20 && (unchanged == 0 || inCommit == 0) {
		t.Errorf("the kills do not cover the call: %d unchanged, %d inside the commit", unchanged, inCommit)
	}
}

// quarantineContents is the set of sha256s of the regular files in the
// quarantine.
func quarantineContents(t *testing.T, qdir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(qdir)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			held[sha(readFile(t, filepath.Join(qdir, e.Name())))] = true
		}
	}
	return held
}

// journalsLeft lists the journals, partial journals and set-aside/ in
// the state directory dir: what recovery must leave none of (the
// quarantine's index and key, the touch log and checkpoints stay).
func journalsLeft(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "journal-") || strings.HasPrefix(n, "partial-journal-") || n == "set-aside" {
			left = append(left, n)
		}
	}
	return left
}

// killMidCall calls name with args and kills the server's whole process
// group while it runs: on even trials after a random share of whole (the
// call's time unhindered, so kills land before, inside and after its
// commit), on odd ones just after a journal appears in journals (inside
// the commit). It reports whether a journal was on disk at the kill and
// whether the call was answered ok before it died.
func killMidCall(t *testing.T, s *server, trial int, rng *rand.Rand, whole time.Duration, journals, name string, args map[string]any) (inCommit, ok bool) {
	t.Helper()
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		done <- outcome{res, err}
	}()
	if trial%2 == 0 {
		time.Sleep(time.Duration(rng.Int64N(int64(whole * 3 / 2))))
	} else if waitJournal(journals, time.Minute) {
		time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Microsecond))))
	}
	inCommit = journalOnDisk(journals)
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("trial %d: kill the process group: %v", trial, err)
	}
	o := <-done
	s.session.Close()
	return inCommit, o.err == nil && !o.res.IsError
}

// journalOnDisk reports whether a patch journal is in the state
// directory dir.
func journalOnDisk(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "journal-") {
			return true
		}
	}
	return false
}

// waitJournal polls the state directory dir until a patch journal
// appears.
func waitJournal(dir string, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if journalOnDisk(dir) {
			return true
		}
		time.Sleep(50 * time.Microsecond)
	}
	return false
}
