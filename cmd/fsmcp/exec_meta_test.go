package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// metaScript tries every descriptor trick on each path in argv: a
// descriptor opened with access mode 3, with O_PATH, for reading, one
// reopened through /proc/self/fd, and one inherited by a forked child;
// with each, every call that changes metadata through a descriptor. Each
// line is "trick path what=answer", the answer "ok" or an errno name.
const metaScript = `
import errno, os, sys
def answer(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def ops(fd):
    return [("fchmod", lambda: os.fchmod(fd, 0o4777)),
            ("fchmod-plain", lambda: os.fchmod(fd, 0o700)),
            ("fchown", lambda: os.fchown(fd, -1, -1)),
            ("fsetxattr", lambda: os.setxattr(fd, "user.fsmcp", b"evil")),
            ("fremovexattr", lambda: os.removexattr(fd, "user.keep")),
            ("futimens", lambda: os.utime(fd, (1000, 1000))),
            ("utimensat-null", lambda: os.utime(fd))]
def attack(trick, path, opener):
    fd = None
    def o():
        nonlocal fd
        fd = opener(path)
    print(trick, path, "open=" + answer(o), flush=True)
    if fd is None:
        return
    for name, f in ops(fd):
        print(trick, path, name + "=" + answer(f), flush=True)
def reopen(p):
    return os.open("/proc/self/fd/%d" % os.open(p, os.O_PATH), 3)
for p in sys.argv[1:]:
    attack("mode3", p, lambda p: os.open(p, 3))
    attack("opath", p, lambda p: os.open(p, os.O_PATH))
    attack("read", p, lambda p: os.open(p, os.O_RDONLY))
    attack("reopen", p, reopen)
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        continue
    pid = os.fork()
    if pid == 0:
        for name, f in ops(fd):
            print("inherited", p, name + "=" + answer(f), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
`

// perlMeta is the attack as first reported, and openat2, whose flags a
// filter cannot see: perl's sysopen with access mode 3, then chmod and
// utime on the handle; openat2 (437 on x86_64) with access mode 3.
const perlMeta = `
my $p = $ARGV[0];
if (sysopen(my $fh, $p, 3)) {
    print "perl-mode3 $p open=ok\n";
    print "perl-mode3 $p fchmod=", (chmod(04777, $fh) ? "ok" : $!+0), "\n";
    print "perl-mode3 $p futimens=", (utime(1000, 1000, $fh) ? "ok" : $!+0), "\n";
} else {
    print "perl-mode3 $p open=", $!+0, "\n";
}
my $how = pack("QQQ", 3, 0, 0);
my $fd = syscall(437, -100, $p, $how, 24);
print "openat2 $p open=", ($fd >= 0 ? "ok" : $!+0), "\n";
`

// metaSnapshot is what the attacks must leave alone.
func metaSnapshot(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	n, _ := unix.Listxattr(path, buf)
	return fmt.Sprintf("mode=%o uid=%d gid=%d mtime=%v xattrs=%q", st.Mode, st.Uid, st.Gid, st.Mtim, buf[:max(n, 0)])
}

// metaCanary makes a file with an extended attribute in dir.
func metaCanary(t *testing.T, dir, name string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte("canary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.keep", []byte("original"), 0); err != nil {
		t.Skipf("the file system of %s has no user extended attributes, which the attacks need: %v", dir, err)
	}
	return f
}

// metaAnswers runs the attacks on paths and returns each line's answer by
// "trick path what".
func metaAnswers(t *testing.T, s *server, paths ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	collect := func(argv []string) {
		r := s.execCall(map[string]any{"argv": argv, "timeout_s": 20})
		if r.exit(t) != 0 {
			t.Fatalf("%s: %s", argv[0], r.text)
		}
		for _, l := range strings.Split(strings.TrimSpace(r.str("stdout")), "\n") {
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("%s printed %q", argv[0], l)
			}
			got[k] = v
		}
	}
	python, _ := filepath.EvalSymlinks("/usr/bin/python3")
	collect(append([]string{filepath.Base(python), "-I", "-c", metaScript}, paths...))
	for _, p := range paths {
		collect([]string{"perl", "-e", perlMeta, p})
	}
	return got
}

// metaFlags grant python3 (by its real name, python3.N) with its standard
// library, perl, and read on dir, the directory of a canary.
func metaFlags(t *testing.T, dir string) []string {
	t.Helper()
	needTool(t, "perl")
	python, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skipf("python3 is not installed: %v", err)
	}
	return []string{"--exec", python, "--exec-read", filepath.Join("/usr/lib", filepath.Base(python)),
		"--exec", "/usr/bin/perl", "--exec-read", "/usr/lib/x86_64-linux-gnu/perl-base", "--exec-read", dir}
}

// No descriptor lets a command change the metadata of a file outside the
// root, whether the command may read it (an --exec-read directory) or
// not, nor of a file of a read-only root. Both layers answer here: the
// seccomp filter first (EPERM, ENOSYS for openat2), the read-only mounts
// behind it (each alone: TestCommandFilterMetadata and
// TestExecMountsReadOnly in sandbox/).
//
// As an unprivileged uid that owns the files the answers are the same
// (TestExecMetadataUnprivileged): both layers refuse before the kernel
// looks at who owns the file.
func TestExecMetadataReadOnlyRoot(t *testing.T) {
	root := t.TempDir()
	outside := metaOutside(t)
	readable := metaCanary(t, outside, "readable")
	hidden := metaCanary(t, filepath.Dir(outside), filepath.Base(outside)+"-hidden")
	t.Cleanup(func() { os.Remove(hidden) })
	inRoot := metaCanary(t, root, "inroot")
	files := []string{readable, hidden, inRoot}
	before := map[string]string{}
	for _, f := range files {
		before[f] = metaSnapshot(t, f)
	}
	s := start(t, root, metaFlags(t, outside)...)
	got := metaAnswers(t, s, readable, hidden, "inroot")
	attempts := 0
	for k, v := range got {
		t.Logf("%s=%s", k, v)
		what := k[strings.LastIndexByte(k, ' ')+1:]
		if what == "open" {
			continue
		}
		attempts++
		if v == "ok" || v == "0" {
			t.Errorf("%s = %s, want refused", k, v)
		}
	}
	want := map[string]string{
		"mode3 " + readable + " open": "EPERM", "mode3 " + hidden + " open": "EPERM", "mode3 inroot open": "EPERM",
		"reopen " + hidden + " open": "EPERM", "reopen inroot open": "EPERM",
		"read " + readable + " open": "ok", "read inroot open": "ok", "read " + hidden + " open": "EACCES",
		"read inroot fchmod": "EPERM", "read " + readable + " fchmod": "EPERM",
		"inherited inroot fsetxattr": "EPERM", "inherited " + readable + " utimensat-null": "EPERM",
		"opath inroot fchmod":              "EPERM",
		"perl-mode3 " + readable + " open": fmt.Sprint(int(unix.EPERM)), "perl-mode3 inroot open": fmt.Sprint(int(unix.EPERM)),
		"openat2 " + hidden + " open": fmt.Sprint(int(unix.ENOSYS)), "openat2 inroot open": fmt.Sprint(int(unix.ENOSYS)),
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %s", k, got[k], w)
		}
	}
	if attempts < 40 {
		t.Errorf("only %d metadata calls were tried", attempts)
	}
	for _, f := range files {
		if after := metaSnapshot(t, f); after != before[f] {
			t.Errorf("%s changed:\nbefore %s\nafter  %s", f, before[f], after)
		}
	}
}

// Under --exec-writable the filter lets descriptor metadata calls through
// (the root's files need them) but for a set-user-ID or set-group-ID
// mode; the read-only mounts still refuse them for everything outside
// the root, with EROFS. The root's own files change, as the flag
// promises.
func TestExecMetadataWritableRoot(t *testing.T) {
	root := t.TempDir()
	outside := metaOutside(t)
	readable := metaCanary(t, outside, "readable")
	before := metaSnapshot(t, readable)
	inRoot := metaCanary(t, root, "inroot")
	rootBefore := metaSnapshot(t, inRoot)
	s := start(t, root, append(metaFlags(t, outside), "--exec-writable")...)
	got := metaAnswers(t, s, readable, "inroot")
	for k, v := range got {
		t.Logf("%s=%s", k, v)
		if strings.Contains(k, readable) && !strings.HasSuffix(k, " open") && (v == "ok" || v == "0") {
			t.Errorf("%s = %s, want refused", k, v)
		}
	}
	want := map[string]string{
		"mode3 " + readable + " open": "EPERM", "mode3 inroot open": "EPERM",
		"read " + readable + " fchmod": "EPERM", "read " + readable + " fchmod-plain": "EROFS", "read " + readable + " fchown": "EROFS",
		"read " + readable + " fsetxattr": "EROFS", "read " + readable + " fremovexattr": "EROFS",
		"read " + readable + " futimens": "EROFS", "read " + readable + " utimensat-null": "EROFS",
		"inherited " + readable + " fchmod-plain": "EROFS", "opath " + readable + " fsetxattr": "EBADF",
		"read inroot fchmod": "EPERM", "read inroot fchmod-plain": "ok", "read inroot fsetxattr": "ok", "read inroot futimens": "ok",
		"openat2 inroot open": fmt.Sprint(int(unix.ENOSYS)),
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %s", k, got[k], w)
		}
	}
	if after := metaSnapshot(t, readable); after != before {
		t.Errorf("%s changed:\nbefore %s\nafter  %s", readable, before, after)
	}
	if after := metaSnapshot(t, inRoot); after == rootBefore {
		t.Errorf("the root's own file did not change under --exec-writable: %s", after)
	}
}

// fs_stat of the root names what guards metadata, and the runner's
// start-up probes: an access-mode-3 open of a granted program (outside the
// root) and fchmod through a read-only descriptor of it, both refused.
func TestExecMetadataAttested(t *testing.T) {
	for _, c := range []struct {
		flags      []string
		fchmodRead string
		guards     string
	}{
		{execSh, "EPERM", "fchmod, fchown, fsetxattr, fremovexattr and futimens"},
		{append(append([]string{}, execSh...), "--exec-writable"), "EROFS", "read-only mounts but the scratch and the root"},
	} {
		s := start(t, t.TempDir(), c.flags...)
		e := s.wantOK("fs_stat", map[string]any{"path": ""}).doc["confinement"].(map[string]any)["exec"].(map[string]any)
		guards := fmt.Sprint(e["metadata_guards"])
		if !strings.Contains(guards, "locked in each command's own user and mount namespaces") ||
			!strings.Contains(guards, "seccomp refuses access-mode-3 opens, openat2") || !strings.Contains(guards, c.guards) {
			t.Errorf("%q: metadata_guards = %s", c.flags, guards)
		}
		got := map[string]string{}
		probes, _ := e["selftest"].([]any)
		for _, p := range probes {
			p := p.(map[string]any)
			got[p["probe"].(string)] = fmt.Sprint(p["result"], " ", p["refused"])
		}
		want := map[string]string{
			"access-mode-3 open outside the root":                    "EPERM true",
			"fchmod through a read-only descriptor outside the root": c.fchmodRead + " true",
		}
		if len(got) != len(want) {
			t.Errorf("%q: selftest = %v", c.flags, got)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%q: selftest %q = %q, want %q", c.flags, k, got[k], w)
			}
		}
	}
}

// A writable command is refused, naming both names, while a protected or
// denied file has a second name in the root: through notes/cfg it would
// append to .git/config. Once the second name is gone it runs.
func TestExecSecondNameRefused(t *testing.T) {
	root := t.TempDir()
	for name, content := range map[string]string{".git/config": "[core]\n", "secret.txt": "SECRET\n", "ok.txt": "fine\n"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(from, to string) {
		if err := os.Link(filepath.Join(root, from), filepath.Join(root, to)); err != nil {
			t.Fatal(err)
		}
	}
	link(".git/config", "notes/cfg")
	link("secret.txt", "notes/s")
	link("ok.txt", "notes/ok")
	s := start(t, root, "--exec-writable", "--deny", "secret.txt", "--exec", "/bin/sh")
	appendCfg := sh("echo '\tfsmonitor = ./evil.sh' >> notes/cfg")
	r := s.wantErr("fs_exec", appendCfg, "precondition_failed")
	e := r.doc["error"].(map[string]any)
	if e["path"] != ".git/config" || !strings.Contains(e["message"].(string), "notes/cfg") {
		t.Errorf("the refusal does not name both names: %s", r.text)
	}
	if err := os.Remove(filepath.Join(root, "notes/cfg")); err != nil {
		t.Fatal(err)
	}
	r = s.wantErr("fs_exec", sh("true"), "precondition_failed")
	if e := r.doc["error"].(map[string]any); e["path"] != "secret.txt" || !strings.Contains(e["message"].(string), "denied by the policy and has a second name in the root, notes/s") {
		t.Errorf("the refusal does not name the denied file and its second name: %s", r.text)
	}
	if err := os.Remove(filepath.Join(root, "notes/s")); err != nil {
		t.Fatal(err)
	}
	// A second name of a file the policy leaves alone refuses nothing.
	if code, r := s.shExit("echo more >> notes/ok"); code != 0 {
		t.Fatalf("with no protected file linked: %s", r.text)
	}
	if b, err := os.ReadFile(filepath.Join(root, ".git/config")); err != nil || string(b) != "[core]\n" {
		t.Errorf(".git/config = %q, %v", b, err)
	}
	// Without --exec-writable nothing is refused: the root is read-only.
	ro := start(t, root, "--exec", "/bin/sh")
	link("secret.txt", "notes/s")
	if code, r := ro.shExit("true"); code != 0 {
		t.Errorf("read-only command with a linked denied file: %s", r.text)
	}
}

// The same attacks with fsmcp running as an unprivileged uid that owns the
// canaries (the case where ownership alone would let fchmod through): the
// answers are root's. The server is a copy of the test binary, where that
// uid can execute it.
func TestExecMetadataUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the server as another uid")
	}
	const uid = 65534
	base, err := os.MkdirTemp("/var/tmp", "fsmcp-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(base, "fsmcp")
	copyFile(t, os.Args[0], exe, 0o755)
	mkdir := func(name string) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	root, outside, home := mkdir("root"), mkdir("outside"), mkdir("home")
	readable, inRoot := metaCanary(t, outside, "readable"), metaCanary(t, root, "inroot")
	for _, p := range []string{root, outside, home, readable, inRoot} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]string{readable: metaSnapshot(t, readable), inRoot: metaSnapshot(t, inRoot)}
	sp := spawn(t, root, append(metaFlags(t, outside), stateDirIn(t, filepath.Dir(home), uid, uid))...)
	sp.cmd.Path = exe
	sp.cmd.Env = append(sp.cmd.Env, "HOME="+home)
	sp.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	s := connectWith(t, sp, nil, "")
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sp.cmd.Process.Pid)); err != nil || !strings.Contains(string(b), fmt.Sprintf("\nUid:\t%d\t", uid)) {
		t.Fatalf("the server does not run as uid %d: %v\n%s", uid, err, b)
	}
	got := metaAnswers(t, s, readable, "inroot")
	for k, v := range got {
		if !strings.HasSuffix(k, " open") && (v == "ok" || v == "0") {
			t.Errorf("%s = %s, want refused", k, v)
		}
	}
	for k, w := range map[string]string{"mode3 " + readable + " open": "EPERM", "read " + readable + " fchmod": "EPERM",
		"read inroot fchown": "EPERM", "inherited " + readable + " futimens": "EPERM"} {
		if got[k] != w {
			t.Errorf("%s = %q, want %s", k, got[k], w)
		}
	}
	for f, b := range before {
		if after := metaSnapshot(t, f); after != b {
			t.Errorf("%s changed:\nbefore %s\nafter  %s", f, b, after)
		}
	}
}

// metaOutside makes the directory outside the root that holds a test's
// canaries, under /var/tmp (commands see /tmp as their own), removed when
// the test ends.
func metaOutside(t *testing.T) string {
	t.Helper()
	outside, err := os.MkdirTemp("/var/tmp", "fsmcp-meta-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	return outside
}
