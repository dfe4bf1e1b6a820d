package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stateSub is the root's own subdirectory of the state directory state.
func stateSub(t *testing.T, state, root string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(root, &st); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(state, fmt.Sprintf("root-%d-%d", st.Dev, st.Ino))
}

// setAsideRecords is the journal_set_aside records of the audit log file.
func setAsideRecords(t *testing.T, file string) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, line := range strings.Split(string(b), "\n") {
		var m map[string]string
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == "journal_set_aside" {
			out = append(out, m)
		}
	}
	return out
}

// stopped closes the client's session and waits for fsmcp to exit.
func (s *server) stopped() {
	s.t.Helper()
	s.session.Close()
	s.stdin.Close()
	if code := s.wait(30 * time.Second); code != 0 {
		s.t.Fatalf("fsmcp exited %d\nstderr:\n%s", code, s.stderr.String())
	}
}

// checkSetAside checks that the journal name was set aside once: kept in
// the state directory's set-aside/ as kept, named in one stderr line and
// one audit record.
func checkSetAside(t *testing.T, s *server, sub, kept, audit string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sub, kept)); err != nil {
		t.Errorf("the journal is not kept as %s: %v", kept, err)
	}
	if n := strings.Count(s.stderr.String(), "journal set aside, not replayed: "+kept+": "); n != 1 {
		t.Errorf("stderr names %s %d times, want once:\n%s", kept, n, s.stderr.String())
	}
	recs := setAsideRecords(t, audit)
	if len(recs) != 1 || recs[0]["journal"] != kept || recs[0]["state_dir"] != sub || recs[0]["reason"] == "" {
		t.Errorf("audit records %v, want one naming %s in %s", recs, kept, sub)
	}
}

// The forgery: a command writes a journal in the old format into
// the root, naming .git/hooks/pre-commit and a payload, while the root
// has no .git; the user runs git init; the next start must not replay it.
// It is moved out of the root into the state directory's set-aside/,
// named on stderr and in the audit, and no hook appears.
func TestRecoverNeverReplaysARootJournal(t *testing.T) {
	base := t.TempDir()
	root, state, audit := filepath.Join(base, "root"), filepath.Join(base, "state"), filepath.Join(base, "audit.log")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--state-dir", state, "--exec", "/bin/sh", "--exec", "/usr/bin/stat", "--exec-writable"}
	s := start(t, root, flags...)
	b64 := base64.StdEncoding.EncodeToString
	journal := tempPrefix + "journal-forged"
	script := fmt.Sprintf(`printf '#!/bin/sh\necho owned\n' > %[1]s && ino=$(stat -c %%i %[1]s) &&
printf '{"entries":[{"dir":"","name":"%[2]s","tmp":"%[3]s","kind":"delete","old_ino":%%s}]}' "$ino" > %[4]s`,
		tempPrefix+"payload", b64([]byte(".git/hooks/pre-commit")), b64([]byte(tempPrefix+"payload")), journal)
	if code, r := s.shExit(script); code != 0 {
		t.Fatalf("the command could not write the journal: %s", r.text)
	}
	if _, err := os.Stat(filepath.Join(root, journal)); err != nil {
		t.Fatalf("the command's journal is not in the root: %v", err)
	}
	s.stopped()
	run(t, root, []int{0}, "git", "init", "-q")
	s = start(t, root, append(flags, "--audit-log", audit)...)
	s.wantOK("fs_stat", map[string]any{"path": ""})
	s.stopped()
	if _, err := os.Lstat(filepath.Join(root, ".git", "hooks", "pre-commit")); err == nil {
		t.Fatal("the forged journal was replayed: .git/hooks/pre-commit exists")
	}
	if _, err := os.Lstat(filepath.Join(root, journal)); err == nil {
		t.Error("the forged journal is still in the root")
	}
	checkSetAside(t, s, stateSub(t, state, root), "set-aside/root-"+journal, audit)
}

// sealed is b as a journal in the state directory: the header line with
// its sha256, then b.
func sealed(b []byte) []byte {
	sum := sha256.Sum256(b)
	return append([]byte("fsmcp-journal 1 "+hex.EncodeToString(sum[:])+"\n"), b...)
}

// A journal in the state directory whose content does not match its
// sha256 is set aside, named once on stderr and in the audit, and the
// start goes on to serve; the client learns only that the journals are
// outside the root.
func TestRecoverSetsAsideATamperedJournal(t *testing.T) {
	base := t.TempDir()
	root, state, audit := filepath.Join(base, "root"), filepath.Join(base, "state"), filepath.Join(base, "audit.log")
	writeTree(t, root, map[string]string{"a": "a\n"})
	sub := stateSub(t, state, root)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	syscall.Stat(root, &st)
	j := sealed([]byte(fmt.Sprintf(`{"root_dev":%d,"root_ino":%d,"entries":[]}`, st.Dev, st.Ino)))
	// One byte of the body changed after the sum was taken.
	j[len(j)-2] = ' '
	writeFile(t, filepath.Join(sub, "journal-tampered"), j, 0o600)
	s := start(t, root, "--state-dir", state, "--audit-log", audit)
	s.wantOK("fs_stat", map[string]any{"path": "a"})
	// The attestation says where the journals are, never the host path,
	// nor what was set aside.
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	if c, _ := r.doc["confinement"].(map[string]any); c["patch_journal"] != "state directory outside the root" {
		t.Errorf("confinement.patch_journal = %v", c["patch_journal"])
	}
	noHostPath(t, r.text, state)
	if strings.Contains(r.text, "tampered") {
		t.Errorf("the reply names the journal set aside: %s", r.text)
	}
	s.stopped()
	if _, err := os.Lstat(filepath.Join(sub, "journal-tampered")); err == nil {
		t.Error("the tampered journal is still where recovery reads journals")
	}
	checkSetAside(t, s, sub, "set-aside/journal-tampered", audit)
	if !strings.Contains(s.stderr.String(), "sha256 does not match") {
		t.Errorf("stderr does not say why:\n%s", s.stderr.String())
	}
}

// A journal that verifies but whose old versions went to a quarantine
// this start does not have refuses the start, naming the journal and
// --discard-journal; with --discard-journal naming it, fsmcp sets it
// aside and serves.
func TestRecoverRefusesWithoutItsQuarantine(t *testing.T) {
	base := t.TempDir()
	root, state, audit := filepath.Join(base, "root"), filepath.Join(base, "state"), filepath.Join(base, "audit.log")
	writeTree(t, root, map[string]string{"a": "new\n"})
	sub := stateSub(t, state, root)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	var rs, as syscall.Stat_t
	syscall.Stat(root, &rs)
	syscall.Stat(filepath.Join(root, "a"), &as)
	b64 := base64.StdEncoding.EncodeToString
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	// A replace of a, placed, whose old version was moved into a
	// quarantine since removed.
	body := fmt.Sprintf(`{"root_dev":%d,"root_ino":%d,"q_dev":%d,"q_ino":%d,"entries":[{"dir":"","name":"%s","tmp":"%s","kind":"replace",`+
		`"new_ino":%d,"new_size":4,"new_sha256":"%s","old_ino":%d,"old_size":4,"old_sha256":"%s","q":"%s"}]}`,
		rs.Dev, rs.Ino, rs.Dev, rs.Ino+1000003, b64([]byte("a")), b64([]byte(tempPrefix+"staged")),
		as.Ino, sum("new\n"), as.Ino+1, sum("old\n"), b64([]byte("fsmcp-q-0-gone")))
	const name = "journal-0123456789abcdef"
	writeFile(t, filepath.Join(sub, name), sealed([]byte(body)), 0o600)

	cmd := fsmcpCommand(root, "--state-dir", state)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("fsmcp without the journal's quarantine: %v, want exit 1\nstderr:\n%s", err, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, filepath.Join(sub, name)) || !strings.Contains(msg, "--discard-journal "+name) {
		t.Errorf("the refusal does not name the journal and --discard-journal:\n%s", msg)
	}
	if _, err := os.Stat(filepath.Join(sub, name)); err != nil {
		t.Fatalf("the refused start moved the journal: %v", err)
	}

	s := start(t, root, "--state-dir", state, "--audit-log", audit, "--discard-journal", name)
	if got := s.wantOK("fs_read", map[string]any{"path": "a"}); !strings.Contains(got.text, "new") {
		t.Errorf("fs_read a = %s, want the file as the crash left it", got.text)
	}
	s.stopped()
	checkSetAside(t, s, sub, "set-aside/"+name, audit)
}

// The front-end refuses a state directory the agent could write: inside
// the root, or a root subdirectory others may write. Each refusal is exit
// 2 with the reason, before anything is served.
func TestStateDirRefusals(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	writeTree(t, root, map[string]string{"a": "a\n"})
	open := filepath.Join(base, "open")
	sub := stateSub(t, open, root)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, dir, want string }{
		{"inside the root", filepath.Join(root, "state"), "must lie outside --root"},
		{"the root itself", root, "must lie outside --root"},
		{"writable by others", open, "writable by no one else"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := fsmcpCommand(root, "--state-dir", c.dir)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
				t.Fatalf("fsmcp --state-dir %s: %v, want exit 2\nstderr:\n%s", c.dir, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), c.want)
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(root, "state")); err == nil {
		t.Error("the refused state directory was made in the root")
	}
}
