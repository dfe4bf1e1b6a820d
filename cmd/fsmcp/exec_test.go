package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The programs the command tests grant, all outside the root and /tmp.
var (
	execSh     = []string{"--exec", "/bin/sh"}
	execShTest = []string{"--exec", "/bin/sh", "--exec", "/usr/bin/cat", "--exec", "/usr/bin/sleep",
		"--exec", "/usr/bin/setsid", "--exec", "/usr/bin/yes", "--exec", "/usr/bin/ls", "--exec", "/usr/bin/mkdir"}
)

// execCall runs fs_exec and fails unless it answered ok.
func (s *server) execCall(args map[string]any) reply {
	s.t.Helper()
	return s.wantOK("fs_exec", args)
}

// stream returns one stream of an fs_exec reply, decoded.
func (r reply) stream(t *testing.T, key string) []byte {
	t.Helper()
	switch enc := r.str(key + "_encoding"); enc {
	case "utf8":
		return []byte(r.str(key))
	case "base64":
		b, err := base64.StdEncoding.DecodeString(r.str(key))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return b
	default:
		t.Fatalf("%s_encoding = %q in %s", key, enc, r.text)
	}
	return nil
}

func (r reply) exit(t *testing.T) int64 {
	t.Helper()
	if _, ok := r.doc["exit"].(float64); !ok {
		t.Fatalf("no exit status in %s", r.text)
	}
	return r.num("exit")
}

func sh(script string) map[string]any {
	return map[string]any{"argv": []string{"sh", "-c", script}}
}

// Without the flags there are no command tools; each flag brings only its
// own.
func TestExecToolsAbsentWithoutFlags(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		flags []string
		want  map[string]bool
	}{
		{nil, map[string]bool{"fs_exec": false, "fs_vcs_status": false, "fs_vcs_diff": false}},
		{execSh, map[string]bool{"fs_exec": true, "fs_vcs_status": false, "fs_vcs_diff": false}},
	} {
		got := listTools(t, start(t, root, c.flags...))
		for name, want := range c.want {
			if _, ok := got[name]; ok != want {
				t.Errorf("flags %q: %s listed = %v, want %v", c.flags, name, ok, want)
			}
		}
		if _, ok := got["fs_read"]; !ok {
			t.Errorf("flags %q: fs_read missing", c.flags)
		}
	}
}

// Bad command flags stop the server with one line on stderr.
func TestExecFlagValidation(t *testing.T) {
	root := t.TempDir()
	inside := filepath.Join(root, "true")
	copyFile(t, "/usr/bin/true", inside, 0o755)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--exec", "sh"}, "not an absolute path"},
		{[]string{"--exec", "/nonexistent/prog"}, "no such file"},
		{[]string{"--exec", "/etc/passwd"}, "not an executable file"},
		{[]string{"--exec", inside}, "overlaps the root"},
		{[]string{"--exec", "/usr/bin/sh", "--exec", "/bin/sh"}, "share the base name"},
		{[]string{"--exec-writable"}, "needs --exec"},
		{[]string{"--exec", "/bin/sh", "--exec-writable", "--read-only"}, "contradicts --read-only"},
		{[]string{"--exec", "/bin/sh", "--exec-read", "/nonexistent"}, "no such file"},
		{[]string{"--exec", "/bin/sh", "--exec-read", root}, "overlaps the root"},
		{[]string{"--exec", "/bin/sh", "--exec-read", os.TempDir()}, "overlaps the root"},
		{[]string{"--exec", "/bin/sh", "--exec-max-timeout", "0"}, "must be positive"},
		{[]string{"--exec", "/bin/sh", "--exec-max-pids", "8"}, "--exec-max-pids must be at least 16"},
	} {
		cmd := fsmcpCommand(root, c.flags...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("flags %q: err %v, output %q, want %q", c.flags, err, out, c.want)
		}
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// argv[0] must name a granted program; a granted shell cannot run one
// that is not (the kernel refuses the exec), by path or by name.
func TestExecArgv0NotGranted(t *testing.T) {
	s := start(t, t.TempDir(), execSh...)
	for _, argv0 := range []string{"cat", "/usr/bin/cat", "/bin/../bin/sh", "dash", ""} {
		r := s.wantErr("fs_exec", map[string]any{"argv": []string{argv0, "/etc/hostname"}}, "permission_denied")
		if !strings.Contains(r.text, "not a program this server may run") {
			t.Errorf("argv0 %q: %s", argv0, r.text)
		}
	}
	s.wantErr("fs_exec", map[string]any{"argv": []string{}}, "invalid_argument")
	r := s.execCall(sh("/usr/bin/cat /etc/hostname"))
	if r.exit(t) == 0 || !strings.Contains(r.str("stderr"), "Permission denied") {
		t.Errorf("sh -c cat: %s, want the exec refused", r.text)
	}
	// Control: the same script, unconfined, runs cat.
	if out, err := exec.Command("/bin/sh", "-c", "/usr/bin/cat /etc/hostname").Output(); err != nil || len(out) == 0 {
		t.Fatalf("control: %v %q", err, out)
	}
}

// outsideSecret is a file outside the root and outside /tmp (which
// commands see as their own tmpfs), so only Landlock stands before it.
func outsideSecret(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "fsmcp-exec-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := filepath.Join(dir, "secret")
	if err := os.WriteFile(f, []byte("outside-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// Reading outside the root is refused by the kernel: by absolute path, by
// "..", and through a symlink placed beneath the root.
func TestExecReadOutsideRefused(t *testing.T) {
	root := t.TempDir()
	secret := outsideSecret(t)
	if err := os.Symlink(secret, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../.."+secret, filepath.Join(root, "rel")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, execShTest...)
	for _, p := range []string{secret, "../.." + secret, "link", "rel", "/etc/hostname", "/proc/self/environ", "/proc/1/cmdline"} {
		r := s.execCall(map[string]any{"argv": []string{"cat", p}})
		if r.exit(t) == 0 || strings.Contains(r.str("stdout"), "outside-secret") {
			t.Errorf("cat %s: %s, want refused", p, r.text)
		}
		if !strings.Contains(r.str("stderr"), "Permission denied") && !strings.Contains(r.str("stderr"), "No such file") {
			t.Errorf("cat %s: stderr %q, want the kernel's refusal", p, r.str("stderr"))
		}
	}
	// Control: the file is readable to the test itself.
	if b, err := os.ReadFile(filepath.Join(root, "link")); err != nil || !bytes.Contains(b, []byte("outside-secret")) {
		t.Fatalf("control: %v %q", err, b)
	}
	// Reading beneath the root works, and the root is named by its
	// place in the command's view, never by its host path.
	if err := os.WriteFile(filepath.Join(root, "in"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.execCall(sh("cat in; pwd"))
	if got := r.str("stdout"); got != "inside\n/tmp/root\n" {
		t.Errorf("cat in; pwd = %q", got)
	}
	noHostPath(t, r.text, root)
}

// Without --exec-writable the root is read-only to commands; the scratch
// directory is their HOME and TMPDIR, writable, private to each call. The
// rest of the runner's /tmp is refused by Landlock alone (it is a
// writable tmpfs).
func TestExecWriteRoot(t *testing.T) {
	root := t.TempDir()
	s := start(t, root, execShTest...)
	r := s.execCall(sh("echo x > f"))
	if r.exit(t) == 0 {
		t.Errorf("write under a read-only root: %s", r.text)
	}
	if _, err := os.Stat(filepath.Join(root, "f")); err == nil {
		t.Error("the file was created")
	}
	r = s.execCall(sh(`test "$HOME" = "$TMPDIR" && echo x > "$HOME/f" && cat "$HOME/f" && echo y > /tmp/other`))
	if r.str("stdout") != "x\n" || !strings.Contains(r.str("stderr"), "Permission denied") {
		t.Errorf("scratch write, then /tmp: %s", r.text)
	}
	r = s.execCall(sh(`ls -a "$HOME"; ls /tmp/home`))
	if r.str("stdout") != ".\n..\n" {
		t.Errorf("a second call sees %q in its scratch directory, want it empty, and no other call's", r.str("stdout"))
	}

	w := start(t, root, append(execShTest, "--exec-writable")...)
	r = w.execCall(sh("mkdir -p d && echo x > d/f"))
	if r.exit(t) != 0 {
		t.Fatalf("write with --exec-writable: %s", r.text)
	}
	if b, err := os.ReadFile(filepath.Join(root, "d", "f")); err != nil || string(b) != "x\n" {
		t.Errorf("d/f = %q, %v", b, err)
	}
}

// A binary copied beneath the root never runs: not as argv[0], not from a
// granted shell, not through the dynamic loader (which has execute, as
// every dynamic program needs it): the root is mounted noexec for
// commands and Landlock grants no execute beneath it.
func TestExecCopiedBinaryRefused(t *testing.T) {
	root := t.TempDir()
	copyFile(t, "/usr/bin/true", filepath.Join(root, "mytrue"), 0o755)
	for _, flags := range [][]string{execSh, append(execShTest, "--exec-writable")} {
		s := start(t, root, flags...)
		s.wantErr("fs_exec", map[string]any{"argv": []string{"./mytrue"}}, "permission_denied")
		for _, script := range []string{"./mytrue", "exec ./mytrue", "/lib64/ld-linux-x86-64.so.2 ./mytrue",
			`cp mytrue "$HOME/t" 2>/dev/null; cat mytrue > "$HOME/t"; "$HOME/t"`} {
			r := s.execCall(sh(script))
			if r.exit(t) == 0 {
				t.Errorf("flags %q: sh -c %q ran: %s", flags, script, r.text)
			}
		}
	}
	// Control: the copy does run outside the confinement.
	if err := exec.Command(filepath.Join(root, "mytrue")).Run(); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TCP and UDP to a loopback listener are refused; the same scripts reach
// the listeners unconfined.
func TestExecNetworkRefused(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 64)
			n, _ := c.Read(b)
			got <- "tcp:" + string(b[:n])
			c.Close()
		}
	}()
	go func() {
		b := make([]byte, 64)
		for {
			n, _, err := udp.ReadFrom(b)
			if err != nil {
				return
			}
			got <- "udp:" + string(b[:n])
		}
	}()
	tcpScript := fmt.Sprintf("echo hello > /dev/tcp/127.0.0.1/%d", tcp.Addr().(*net.TCPAddr).Port)
	udpScript := fmt.Sprintf("echo hello > /dev/udp/127.0.0.1/%d", udp.LocalAddr().(*net.UDPAddr).Port)
	s := start(t, t.TempDir(), "--exec", "/bin/bash")
	for _, script := range []string{tcpScript, udpScript} {
		r := s.execCall(map[string]any{"argv": []string{"bash", "-c", script}})
		if r.exit(t) == 0 {
			t.Errorf("bash -c %q: %s, want refused", script, r.text)
		}
	}
	select {
	case m := <-got:
		t.Fatalf("a confined command reached the listener: %s", m)
	case <-time.After(200 * time.Millisecond):
	}
	// Control: the same scripts, unconfined, get through.
	for _, c := range []struct{ script, want string }{{tcpScript, "tcp:hello\n"}, {udpScript, "udp:hello\n"}} {
		if out, err := exec.Command("/bin/bash", "-c", c.script).CombinedOutput(); err != nil {
			t.Fatalf("control %q: %v %s", c.script, err, out)
		}
		select {
		case m := <-got:
			if m != c.want {
				t.Errorf("control got %q, want %q", m, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("control %q never arrived", c.script)
		}
	}
}

// The timeout kills the command and every process it started, including
// one that left its process group and session.
func TestExecTimeoutKillsGrandchild(t *testing.T) {
	root := t.TempDir()
	s := start(t, root, append(execShTest, "--exec-writable")...)
	start := time.Now()
	r := s.execCall(map[string]any{"argv": []string{"sh", "-c",
		`setsid sh -c 'while :; do echo x >> tick; sleep 0.05; done' & sleep 100`}, "timeout_s": 1})
	if r.doc["timed_out"] != true || r.str("signal") != "SIGKILL" || r.doc["exit"] != nil {
		t.Errorf("reply %s, want timed_out, SIGKILL, exit null", r.text)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the call took %v", d)
	}
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(root, "tick"))
		if err != nil {
			t.Fatalf("the grandchild never ran: %v", err)
		}
		return fi.Size()
	}
	before := size()
	time.Sleep(500 * time.Millisecond)
	if after := size(); after != before {
		t.Errorf("the grandchild still runs: tick grew from %d to %d", before, after)
	}
	// A command that exits leaves nothing behind either.
	r = s.execCall(sh(`setsid sh -c 'sleep 1; echo late > late' & echo early`))
	if r.str("stdout") != "early\n" || r.exit(t) != 0 {
		t.Errorf("reply %s", r.text)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(root, "late")); err == nil {
		t.Error("a process the command left behind outlived it")
	}
}

// Output is bounded per stream, never splits a character, and says it
// was cut; a stream that is not UTF-8 comes back as base64.
func TestExecOutputBounds(t *testing.T) {
	s := start(t, t.TempDir(), append(execShTest, "--max-response-bytes", "65536")...)
	r := s.execCall(map[string]any{"argv": []string{"yes"}, "max_bytes": 1000, "timeout_s": 1})
	if got := r.stream(t, "stdout"); len(got) != 1000 || r.doc["stdout_truncated"] != true || r.doc["timed_out"] != true {
		t.Errorf("yes: %d bytes, truncated %v, timed_out %v", len(got), r.doc["stdout_truncated"], r.doc["timed_out"])
	}
	// The largest max_bytes on both streams still fits the reply bound.
	r = s.execCall(map[string]any{"argv": []string{"sh", "-c", "yes | (yes >&2 & cat)"}, "max_bytes": 1 << 20, "timeout_s": 1})
	if len(r.text) > 65536 || r.doc["stdout_truncated"] != true || r.doc["stderr_truncated"] != true ||
		len(r.str("stdout")) < 20000 || len(r.str("stderr")) < 20000 {
		t.Errorf("reply of %d bytes, stdout %d, stderr %d", len(r.text), len(r.str("stdout")), len(r.str("stderr")))
	}
	s.wantErr("fs_exec", map[string]any{"argv": []string{"yes"}, "max_bytes": 1<<20 + 1}, "invalid_argument")
	s.wantErr("fs_exec", map[string]any{"argv": []string{"yes"}, "timeout_s": 301}, "invalid_argument")
	// A cut inside a two-byte character keeps the text whole.
	r = s.execCall(map[string]any{"argv": []string{"sh", "-c", `printf 'ab\303\251cd'`}, "max_bytes": 3})
	if r.str("stdout") != "ab" || r.str("stdout_encoding") != "utf8" || r.doc["stdout_truncated"] != true {
		t.Errorf("cut in a character: %s", r.text)
	}
	r = s.execCall(sh(`printf '\377\376\000x'; printf 'bad\377' >&2; exit 7`))
	if got := r.stream(t, "stdout"); r.str("stdout_encoding") != "base64" || !bytes.Equal(got, []byte{0xff, 0xfe, 0, 'x'}) {
		t.Errorf("binary stdout: %s", r.text)
	}
	if got := r.stream(t, "stderr"); r.str("stderr_encoding") != "base64" || string(got) != "bad\xff" {
		t.Errorf("binary stderr: %s", r.text)
	}
	if r.exit(t) != 7 || r.doc["signal"] != nil {
		t.Errorf("a non-zero exit is an ordinary result: %s", r.text)
	}
}

// stdin reaches the command, as text or as base64 bytes.
func TestExecStdin(t *testing.T) {
	s := start(t, t.TempDir(), execShTest...)
	r := s.execCall(map[string]any{"argv": []string{"cat"}, "stdin": "héllo\n"})
	if r.str("stdout") != "héllo\n" {
		t.Errorf("utf8 stdin: %s", r.text)
	}
	bin := []byte{0, 1, 0xff, '\n'}
	r = s.execCall(map[string]any{"argv": []string{"cat"}, "stdin": base64.StdEncoding.EncodeToString(bin), "stdin_encoding": "base64"})
	if !bytes.Equal(r.stream(t, "stdout"), bin) {
		t.Errorf("base64 stdin: %s", r.text)
	}
	s.wantErr("fs_exec", map[string]any{"argv": []string{"cat"}, "stdin": "!", "stdin_encoding": "base64"}, "invalid_argument")
	s.wantErr("fs_exec", map[string]any{"argv": []string{"cat"}, "stdin": "x", "stdin_encoding": "latin1"}, "invalid_argument")
	// A command that never reads its stdin still ends.
	big := strings.Repeat("x", 512<<10)
	r = s.execCall(map[string]any{"argv": []string{"sh", "-c", "echo done"}, "stdin": big})
	if r.str("stdout") != "done\n" {
		t.Errorf("unread stdin: %s", r.text)
	}
}

// grep keeps the matching stdout lines (rg's syntax); a pattern rg cannot
// parse is refused before the command runs.
func TestExecGrep(t *testing.T) {
	root := t.TempDir()
	s := start(t, root, append(execShTest, "--exec-writable")...)
	r := s.execCall(map[string]any{"argv": []string{"sh", "-c", `printf 'a1\nb2\na3\n'; echo err >&2`}, "grep": `^a\d`})
	if r.str("stdout") != "a1\na3\n" || r.str("stderr") != "err\n" {
		t.Errorf("grep: %s", r.text)
	}
	r = s.execCall(map[string]any{"argv": []string{"sh", "-c", `printf 'x\n'`}, "grep": "nothing"})
	if r.str("stdout") != "" || r.exit(t) != 0 {
		t.Errorf("grep without a match: %s", r.text)
	}
	s.wantErr("fs_exec", map[string]any{"argv": []string{"sh", "-c", "echo ran > ran"}, "grep": "("}, "invalid_argument")
	if _, err := os.Stat(filepath.Join(root, "ran")); err == nil {
		t.Error("the command ran although its grep was refused")
	}
}

// cwd is resolved beneath the root like every path: an escape by ".." or
// by a symlink is outside_root.
func TestExecCwd(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(root, "sub", "up")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, execSh...)
	r := s.execCall(map[string]any{"argv": []string{"sh", "-c", "pwd"}, "cwd": "sub/deeper"})
	if r.str("stdout") != "/tmp/root/sub/deeper\n" {
		t.Errorf("pwd in sub/deeper: %s", r.text)
	}
	for cwd, code := range map[string]string{"..": "outside_root", "sub/../..": "outside_root", "abs": "outside_root",
		"sub/up": "outside_root", "missing": "not_found"} {
		s.wantErr("fs_exec", map[string]any{"argv": []string{"sh", "-c", "pwd"}, "cwd": cwd}, code)
	}
}

// Every command gets the stated limits and environment, nothing of the
// server's.
func TestExecLimitsAndEnvironment(t *testing.T) {
	s := start(t, t.TempDir(), execSh...)
	r := s.execCall(sh("ulimit -a; export -p"))
	out := r.str("stdout")
	for _, want := range []string{"time(seconds)        600", "file(blocks)         2097152", "process              256",
		"nofiles              1024", "vmemory(kbytes)      4194304", "coredump(blocks)     0",
		"export PATH='/usr/local/bin:/usr/bin:/bin'", "export HOME='/tmp/home/", "export TMPDIR='/tmp/home/"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "export "); n != 4 { // the three above and PWD
		t.Errorf("%d variables, want 4:\n%s", n, out)
	}
	if strings.Contains(out, "FSMCP_TEST_FRONTEND") || strings.Contains(out, "GORACE") {
		t.Errorf("the server's environment leaked:\n%s", out)
	}
}

// An interpreter's library directory is read only when the operator
// grants it.
func TestExecReadDir(t *testing.T) {
	script := `use strict; print "ok\n";`
	s := start(t, t.TempDir(), "--exec", "/usr/bin/perl")
	r := s.execCall(map[string]any{"argv": []string{"perl", "-e", script}})
	if r.exit(t) == 0 {
		t.Errorf("perl without its library: %s", r.text)
	}
	s = start(t, t.TempDir(), "--exec", "/usr/bin/perl", "--exec-read", "/usr/lib/x86_64-linux-gnu/perl-base")
	r = s.execCall(map[string]any{"argv": []string{"perl", "-e", script}})
	if r.str("stdout") != "ok\n" {
		t.Errorf("perl with --exec-read: %s", r.text)
	}
	c := s.wantOK("fs_stat", map[string]any{"path": ""}).doc["confinement"].(map[string]any)["exec"].(map[string]any)
	if fmt.Sprint(c["read_dirs"]) != "[/usr/lib/x86_64-linux-gnu/perl-base]" {
		t.Errorf("attested read_dirs %v", c["read_dirs"])
	}
}

// fs_stat of the root attests the command confinement.
func TestExecAttestation(t *testing.T) {
	s := start(t, t.TempDir(), execShTest...)
	c, ok := s.wantOK("fs_stat", map[string]any{"path": ""}).doc["confinement"].(map[string]any)["exec"].(map[string]any)
	if !ok {
		t.Fatal("no confinement.exec")
	}
	if fmt.Sprint(c["programs"]) != "[/bin/sh /usr/bin/cat /usr/bin/sleep /usr/bin/setsid /usr/bin/yes /usr/bin/ls /usr/bin/mkdir]" ||
		c["writable"] != false || c["network_denied"] != true || c["noexec_mounts"] != true ||
		c["seccomp"] != "filter" || c["landlock_abi"].(float64) < 1 ||
		fmt.Sprint(c["namespaces"]) != "[user mount network ipc pid]" || c["max_timeout_s"].(float64) != 300 {
		t.Errorf("confinement.exec = %v", c)
	}
	files := fmt.Sprint(c["exec_files"])
	for _, f := range []string{"/usr/bin/dash", "/usr/bin/cat", "libc.so.6"} {
		if !strings.Contains(files, f) {
			t.Errorf("exec_files %s lacks %s", files, f)
		}
	}
	if s := start(t, t.TempDir()); s != nil {
		if _, ok := s.wantOK("fs_stat", map[string]any{"path": ""}).doc["confinement"].(map[string]any)["exec"]; ok {
			t.Error("confinement.exec without --exec")
		}
	}
}

// workerRules is the worker's start-up line stating its Landlock rules.
func workerRules(t *testing.T, stderr string) string {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "fsmcp worker: landlock") {
			return l
		}
	}
	t.Fatalf("no worker landlock line in:\n%s", stderr)
	return ""
}

// Commands do not widen the file worker: its Landlock ruleset is the same
// with and without them, and it starts no command itself.
func TestExecWorkerDomainUnchanged(t *testing.T) {
	root := t.TempDir()
	plain := start(t, root, "--verbose")
	plain.wantOK("fs_stat", map[string]any{"path": ""})
	with := start(t, root, append(execShTest, "--exec-writable", "--verbose")...)
	with.execCall(sh("true"))
	if a, b := workerRules(t, plain.stderr.String()), workerRules(t, with.stderr.String()); a != b {
		t.Errorf("the worker's rules changed:\nwithout: %s\nwith:    %s", a, b)
	}
	worker := 0
	for _, pid := range childPids(with.cmd.Process.Pid) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); bytes.Contains(b, []byte("__worker")) {
			worker = pid
		}
	}
	if worker == 0 {
		t.Fatal("no worker found")
	}
	if kids := childPids(worker); len(kids) != 0 {
		t.Errorf("the worker has children %v", kids)
	}
}

// The audit log records argv, clipped, and how the command ended; never
// its output or stdin.
func TestExecAudit(t *testing.T) {
	root := t.TempDir()
	s := start(t, root, execShTest...)
	long := strings.Repeat("é", 300)
	s.execCall(map[string]any{"argv": []string{"sh", "-c", "printf '%s-%s' secret output; exit 4", long}, "stdin": "secret-stdin"})
	s.execCall(map[string]any{"argv": []string{"sleep", "10"}, "timeout_s": 1})
	var lines []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for len(lines) < 2 && time.Now().Before(deadline) {
		lines = nil
		for _, l := range strings.Split(s.stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["tool"] == "fs_exec" {
				lines = append(lines, m)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(lines) != 2 {
		t.Fatalf("%d fs_exec audit lines in:\n%s", len(lines), s.stderr.String())
	}
	argv, _ := lines[0]["argv"].([]any)
	if len(argv) != 4 || argv[0] != "sh" || len(argv[3].(string)) > 256 || lines[0]["argv_clipped"] != true ||
		lines[0]["exit"] != 4.0 || lines[0]["timed_out"] != false {
		t.Errorf("first line %v", lines[0])
	}
	if lines[1]["exit"] != nil || lines[1]["signal"] != "SIGKILL" || lines[1]["timed_out"] != true {
		t.Errorf("second line %v", lines[1])
	}
	if out := s.stderr.String(); strings.Contains(out, "secret-output") || strings.Contains(out, "secret-stdin") {
		t.Error("the audit log holds a command's output or stdin")
	}
}

// Concurrent calls each get their own scratch directory and namespace.
func TestExecConcurrentCalls(t *testing.T) {
	s := start(t, t.TempDir(), execShTest...)
	const n = 6
	homes := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_exec",
				Arguments: map[string]any{"argv": []string{"sh", "-c", `echo "$HOME $$"; sleep 0.3`}}})
			if err != nil || res.IsError {
				errs <- fmt.Errorf("call: %v %v", err, res)
				return
			}
			var doc struct{ Stdout string }
			if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &doc); err != nil {
				errs <- err
				return
			}
			homes <- doc.Stdout
		}()
	}
	seen := map[string]bool{}
	for range n {
		select {
		case err := <-errs:
			t.Fatal(err)
		case h := <-homes:
			if seen[h] || !strings.HasSuffix(h, " 1\n") {
				t.Errorf("reply %q (seen before: %v); want a scratch directory of its own, as PID 1", h, seen[h])
			}
			seen[h] = true
		}
	}
	if strings.Contains(s.stderr.String(), "DATA RACE") {
		t.Errorf("a race in a server process:\n%s", s.stderr.String())
	}
}
