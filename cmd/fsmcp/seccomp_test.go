package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// escapeHook runs one of the escapes Landlock alone does not stop, inside
// the process the hook runs in (worker or front-end). known is false for
// an action it does not know.
func escapeHook(action, arg string) (known bool, err error) {
	switch action {
	case "esc-mptcp-listen":
		return true, mptcpListen()
	case "esc-udp-send":
		var c net.Conn
		if c, err = net.Dial("udp", arg); err == nil {
			_, err = c.Write([]byte("escaped"))
			c.Close()
		}
	case "esc-unix-connect":
		var c net.Conn
		if c, err = net.DialTimeout("unix", arg, 5*time.Second); err == nil {
			c.Close()
		}
	case "esc-chmod":
		err = os.Chmod(arg, 0o777)
	case "esc-chown":
		err = os.Chown(arg, 12345, 12345)
	case "esc-setxattr":
		err = unix.Setxattr(arg, "user.planted", []byte("x"), 0)
	case "esc-removexattr":
		err = unix.Removexattr(arg, "user.keep")
	case "esc-utimes":
		err = os.Chtimes(arg, time.Unix(1, 0), time.Unix(1, 0))
	case "esc-ptrace-parent":
		err = ptraceAttach(os.Getppid())
	case "esc-exec":
		// Pipes, not /dev/null, which neither confined process can open:
		// what is refused must be the exec itself.
		cmd := exec.Command(arg, "-c", "true")
		cmd.Stdin = strings.NewReader("")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		err = cmd.Run()
	case "esc-dumpable":
		v, _, e := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_DUMPABLE, 0, 0)
		if e != 0 {
			return true, e
		}
		return true, fmt.Errorf("dumpable=%d", v)
	default:
		return false, nil
	}
	return true, err
}

// mptcpListen listens on MPTCP without Go's fallback to plain TCP, which
// is the case Landlock's TCP rules cover.
func mptcpListen() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return nil
}

// ptraceAttach attaches to pid and, should that work, lets it go at once.
func ptraceAttach(pid int) error {
	if err := unix.PtraceAttach(pid); err != nil {
		return fmt.Errorf("ptrace attach: %w", err)
	}
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, unix.WALL, nil)
	unix.PtraceDetach(pid)
	return nil
}

// victims are the things outside the root a compromised process attacks:
// a file with an extended attribute, a listening pathname unix socket (as
// docker.sock or an ssh-agent would be) and a UDP socket.
type victims struct {
	file     string
	sock     string
	udp      string
	accepted atomic.Int64
	udpConn  net.PacketConn
	snapshot func() string
}

func newVictims(t *testing.T, outside string) *victims {
	t.Helper()
	v := &victims{file: filepath.Join(outside, "victim"), sock: filepath.Join(outside, "agent.sock")}
	if err := os.WriteFile(v.file, []byte("outside\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file system without user xattrs still shows the refusals (the
	// filter answers before the file system is asked); it just has no
	// attribute to lose.
	if err := unix.Setxattr(v.file, "user.keep", []byte("original"), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatalf("setxattr on the test file system: %v", err)
	}
	when := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := os.Chtimes(v.file, when, when); err != nil {
		t.Fatal(err)
	}
	v.snapshot = func() string {
		var st unix.Stat_t
		if err := unix.Lstat(v.file, &st); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := unix.Llistxattr(v.file, buf)
		if err != nil && !errors.Is(err, unix.ENOTSUP) {
			t.Fatal(err)
		}
		val := make([]byte, 256)
		m, _ := unix.Lgetxattr(v.file, "user.keep", val)
		return fmt.Sprintf("mode=%o uid=%d gid=%d atime=%v mtime=%v xattrs=%q keep=%q",
			st.Mode, st.Uid, st.Gid, st.Atim, st.Mtim, buf[:max(n, 0)], val[:max(m, 0)])
	}
	l, err := net.Listen("unix", v.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			v.accepted.Add(1)
			c.Close()
		}
	}()
	if v.udpConn, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.udpConn.Close() })
	v.udp = v.udpConn.LocalAddr().String()
	return v
}

// untouched fails if any attack reached a victim.
func (v *victims) untouched(t *testing.T, before string) {
	t.Helper()
	if after := v.snapshot(); after != before {
		t.Errorf("the file outside the root changed:\nbefore %s\nafter  %s", before, after)
	}
	if n := v.accepted.Load(); n != 0 {
		t.Errorf("the unix socket outside the root accepted %d connections", n)
	}
	v.udpConn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, from, err := v.udpConn.ReadFrom(make([]byte, 64)); err == nil {
		t.Errorf("the UDP socket received %d bytes from %v", n, from)
	}
}

const (
	byLandlock = "permission denied"       // EACCES
	bySeccomp  = "operation not permitted" // EPERM
)

// A compromised worker (a hook runs code inside the fully confined
// worker, bypassing os.Root) tries each gap Landlock ABI 7 leaves open,
// and more; every one is refused, and nothing outside the root changes.
func TestSeccompCompromisedWorker(t *testing.T) {
	root, outside := tree(t)
	v := newVictims(t, outside)
	before := v.snapshot()
	s := start(t, root, "--verbose")
	cases := []struct{ action, arg, want string }{
		{"esc-mptcp-listen", "", bySeccomp},
		{"esc-udp-send", v.udp, bySeccomp},
		{"esc-unix-connect", v.sock, bySeccomp},
		{"esc-chmod", v.file, bySeccomp},
		{"esc-chown", v.file, bySeccomp},
		{"esc-setxattr", v.file, bySeccomp},
		{"esc-removexattr", v.file, bySeccomp},
		{"esc-utimes", v.file, bySeccomp},
		{"esc-ptrace-parent", "", bySeccomp},
		{"esc-dumpable", "", "dumpable=0"},
		// Landlock refuses these first: /bin/sh is not rg, the file is
		// not under the root.
		{"esc-exec", "/bin/sh", byLandlock},
		{"open", v.file, byLandlock},
	}
	for _, c := range cases {
		if got := s.hook(c.action, c.arg); !strings.Contains(got, c.want) {
			t.Errorf("worker %s(%s) = %q, want %q", c.action, c.arg, got, c.want)
		}
	}
	v.untouched(t, before)

	// The filter is attested, with the count the worker logged.
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	conf, _ := r.doc["confinement"].(map[string]any)
	m := regexp.MustCompile(`worker: seccomp filter: (\d+) system calls refused`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("the worker did not log its filter:\n%s", s.stderr.String())
	}
	logged, _ := strconv.Atoi(m[1])
	if conf["seccomp"] != "filter" || conf["seccomp_denied_syscalls"] != float64(logged) || logged < 60 {
		t.Errorf("confinement = %v, want seccomp filter with the %d refused system calls the worker logged", conf, logged)
	}
}

// The same escapes from rg's place: a helper started as rg, by fs_grep,
// in the worker's Landlock domain and under its filter.
func TestSeccompCompromisedRG(t *testing.T) {
	rg := filepath.Join(t.TempDir(), "rg")
	build := exec.Command("go", "build", "-o", rg, "./testdata/fakerg")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the rg stand-in: %v\n%s", err, out)
	}
	root, outside := tree(t)
	v := newVictims(t, outside)
	before := v.snapshot()
	s := start(t, root, "--rg", rg)
	frontend := s.cmd.Process.Pid
	cfg, _ := json.Marshal(map[string]any{"outside": v.file, "sock": v.sock, "udp": v.udp, "frontend": frontend})
	if err := os.WriteFile(filepath.Join(root, "escape.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	if conf, _ := r.doc["confinement"].(map[string]any); !strings.Contains(fmt.Sprint(conf["rg_version"]), "escape probe") {
		t.Fatalf("the worker did not take the stand-in for rg: %v", conf)
	}
	s.call("fs_grep", map[string]any{"path": "", "pattern": "x"})
	b, err := os.ReadFile(filepath.Join(root, "escape-results.json"))
	if err != nil {
		t.Fatalf("the rg stand-in left no results (did fs_grep run it?): %v\nstderr:\n%s", err, s.stderr.String())
	}
	var got map[string]string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mptcp-listen": bySeccomp, "udp-send": bySeccomp, "unix-connect": bySeccomp,
		"chmod": bySeccomp, "chown": bySeccomp, "setxattr": bySeccomp, "removexattr": bySeccomp,
		"utimes": bySeccomp, "ptrace-worker": bySeccomp, "ptrace-frontend": bySeccomp,
		"exec-sh": byLandlock, "open-outside": byLandlock,
	}
	for k, w := range want {
		if !strings.Contains(got[k], w) {
			t.Errorf("rg %s = %q, want %q", k, got[k], w)
		}
	}
	v.untouched(t, before)
}

// Under stdio the front-end has no socket to make: after start-up it
// cannot create one of any kind, nor exec, nor change metadata by path.
func TestSeccompFrontendNoSockets(t *testing.T) {
	root, outside := tree(t)
	v := newVictims(t, outside)
	before := v.snapshot()
	s := start(t, root)
	for _, c := range []struct{ action, arg string }{
		{"frontend-esc-mptcp-listen", ""},
		{"frontend-esc-udp-send", v.udp},
		{"frontend-esc-unix-connect", v.sock},
		{"frontend-esc-exec", "/bin/sh"},
		{"frontend-esc-chmod", v.file},
		{"frontend-esc-setxattr", v.file},
		{"frontend-esc-utimes", v.file},
	} {
		if got := s.hook(c.action, c.arg); !strings.Contains(got, bySeccomp) {
			t.Errorf("front-end %s(%s) = %q, want %q", c.action, c.arg, got, bySeccomp)
		}
	}
	if got := s.hook("frontend-esc-dumpable", ""); got != "dumpable=0" {
		t.Errorf("front-end dumpable: %q, want dumpable=0", got)
	}
	v.untouched(t, before)
	// Still serving.
	s.wantOK("fs_stat", map[string]any{"path": "a.txt"})
}

// Serving HTTP, the front-end still accepts on the listener it bound
// before its filter (every new session below is a new connection), but
// creates no socket of its own and execs nothing.
func TestSeccompFrontendHTTP(t *testing.T) {
	root, outside := tree(t)
	v := newVictims(t, outside)
	before := v.snapshot()
	h := startHTTP(t, root, "--verbose")
	s := h.connect("")
	for _, c := range []struct{ action, arg string }{
		{"frontend-esc-mptcp-listen", ""},
		{"frontend-esc-udp-send", v.udp},
		{"frontend-esc-unix-connect", v.sock},
		{"frontend-esc-exec", "/bin/sh"},
		{"frontend-esc-chmod", v.file},
	} {
		if got := s.hook(c.action, c.arg); !strings.Contains(got, bySeccomp) {
			t.Errorf("HTTP front-end %s(%s) = %q, want %q", c.action, c.arg, got, bySeccomp)
		}
	}
	v.untouched(t, before)
	if !strings.Contains(h.stderr.String(), "front-end seccomp filter") {
		t.Fatalf("the HTTP front-end did not install its filter:\n%s", h.stderr.String())
	}
	for range 3 {
		h.connect("").wantOK("fs_stat", map[string]any{"path": "a.txt"})
	}
}
