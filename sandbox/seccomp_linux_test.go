package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Every name in the lists exists on at least one supported architecture,
// so a typo cannot silently leave a system call allowed.
func TestSeccompNamesExist(t *testing.T) {
	lists := map[string][]string{"denyAlways": denyAlways, "denyNetwork": denyNetwork,
		"denyAccept": denyAccept, "denyExec": denyExec, "enosys": enosys, "hot": hot}
	for _, c := range conditional() {
		lists["conditional"] = append(lists["conditional"], c.Name)
	}
	for list, names := range lists {
		for _, n := range names {
			_, amd := arch.X86_64.SyscallNames[n]
			_, arm := arch.AARCH64.SyscallNames[n]
			if !amd && !arm {
				t.Errorf("%s: %q is a system call on neither x86_64 nor aarch64", list, n)
			}
		}
	}
}

// What the issue requires refused is refused on both architectures, and
// what the worker, rg and metadata preservation need is not.
func TestSeccompPolicyByArch(t *testing.T) {
	mustRefuse := []string{"socket", "socketpair", "ptrace", "process_vm_readv", "process_vm_writev",
		"mount", "umount2", "fsopen", "move_mount", "bpf", "kexec_load", "kexec_file_load", "keyctl",
		"add_key", "unshare", "setns", "perf_event_open", "chmod", "fchmodat", "fchmodat2", "chown",
		"lchown", "fchownat", "utimensat", "setxattr", "lsetxattr", "removexattr", "lremovexattr",
		"io_uring_setup", "clone3"}
	workerNeeds := []string{"read", "write", "openat", "close", "fstat", "newfstatat", "statx",
		"getdents64", "readlinkat", "fchmod", "fchown", "fsetxattr", "fgetxattr", "flistxattr",
		"fremovexattr", "renameat", "renameat2", "linkat", "unlinkat", "mkdirat", "fsync", "fdatasync",
		"ftruncate", "fallocate", "pread64", "pwrite64", "lseek", "getrandom", "futex", "clone",
		"execve", "pipe2", "wait4", "waitid", "pidfd_open", "pidfd_send_signal", "dup3", "fcntl",
		"mmap", "munmap", "mprotect", "madvise", "brk", "rt_sigaction", "rt_sigprocmask",
		"rt_sigreturn", "sigaltstack", "tgkill", "getpid", "gettid", "epoll_pwait", "epoll_ctl",
		"epoll_create1", "eventfd2", "nanosleep", "clock_nanosleep", "sched_yield", "sched_getaffinity",
		"prlimit64", "set_robust_list", "rseq", "set_tid_address", "arch_prctl", "exit", "exit_group",
		"recvmsg", "sendmsg", "getsockopt", "setsockopt", "getsockname", "getpeername", "shutdown",
		"ioctl", "prctl", "poll", "ppoll", "getcwd", "readlink", "access", "faccessat2"}
	for _, info := range []*arch.Info{arch.X86_64, arch.AARCH64} {
		_, refused := policies(info, workerDeny())
		for _, n := range mustRefuse {
			if _, ok := info.SyscallNames[n]; ok && !slices.Contains(refused, n) {
				t.Errorf("%s worker filter allows %s", info.Name, n)
			}
		}
		for _, n := range workerNeeds {
			if _, ok := info.SyscallNames[n]; ok && slices.Contains(refused, n) && !isConditional(n) {
				t.Errorf("%s worker filter refuses %s, which the worker or rg needs", info.Name, n)
			}
		}
		_, fe := policies(info, frontendDeny(false))
		_, feListen := policies(info, frontendDeny(true))
		for _, n := range []string{"execve", "accept4", "socket", "connect", "bind"} {
			if !slices.Contains(fe, n) {
				t.Errorf("%s stdio front-end filter allows %s", info.Name, n)
			}
		}
		if slices.Contains(feListen, "accept4") || !slices.Contains(feListen, "socket") || !slices.Contains(feListen, "bind") {
			t.Errorf("%s listening front-end filter: accept4 refused=%v socket refused=%v bind refused=%v, want false true true",
				info.Name, slices.Contains(feListen, "accept4"), slices.Contains(feListen, "socket"), slices.Contains(feListen, "bind"))
		}
	}
}

func isConditional(name string) bool {
	for _, c := range conditional() {
		if c.Name == name {
			return true
		}
	}
	return false
}

// The native policy assembles into a program the kernel accepts (at most
// 4096 instructions).
func TestSeccompPolicyAssembles(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skipf("no system call table for %s: %v", runtime.GOARCH, err)
	}
	for _, deny := range [][]string{workerDeny(), frontendDeny(false), frontendDeny(true)} {
		filters, _ := policies(info, deny)
		for _, f := range filters {
			prog, err := f.policy.Assemble()
			if err != nil {
				t.Fatalf("assemble: %v", err)
			}
			if len(prog) > 4096 {
				t.Fatalf("filter has %d instructions, the kernel takes at most 4096", len(prog))
			}
		}
	}
}

const childEnv = "FSMCP_SECCOMP_CHILD"

// probe is one system call tried under the filter, and what it must give.
type probe struct {
	name string
	want error // nil: must succeed
	run  func() error
}

// TestSeccompChild is not a test on its own: runFiltered re-runs the test
// binary with only this test selected and childEnv set, and it installs a
// filter (which cannot be undone) and runs the probes there.
func TestSeccompChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("runs only as the subprocess of TestSeccompWorker and TestSeccompFrontend")
	}
	dir := os.Getenv(childEnv + "_DIR")
	// Threads that exist before the filter must be filtered too (TSYNC).
	type res struct{ err error }
	start, done := make(chan struct{}), make(chan res)
	for range 4 {
		go func() {
			runtime.LockOSThread()
			<-start
			_, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
			done <- res{err}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	var st Seccomp
	var err error
	switch mode {
	case "worker":
		st, err = FilterWorker()
	case "frontend":
		st, err = FilterFrontend(false)
	case "frontend-listener":
		st, err = FilterFrontend(true)
	}
	if err != nil {
		fmt.Printf("probe install=%v\n", err)
		return
	}
	fmt.Printf("probe install=ok\nprobe mode=%s\nprobe denied=%d\n", st.Mode, st.Denied)
	close(start)
	for i := range 4 {
		r := <-done
		fmt.Printf("probe thread%d-socket=%s\n", i, errText(r.err))
	}
	for _, p := range probes(dir) {
		fmt.Printf("probe %s=%s\n", p.name, errText(p.run()))
	}
}

// errText names a system call's errno ("EPERM"), or is the error's
// text when it carries more than an errno.
func errText(err error) string {
	var en syscall.Errno
	var pe *os.PathError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &en) && (err == en || errors.As(err, &pe)):
		return unix.ErrnoName(en)
	}
	return err.Error()
}

func errno(_, _ uintptr, e syscall.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// probes are the system calls each child tries; file is a regular file
// in dir whose mode, times and extended attributes the parent checks.
func probes(dir string) []probe {
	file := filepath.Join(dir, "file")
	sock := func(domain, typ, proto int) func() error {
		return func() error {
			fd, err := unix.Socket(domain, typ, proto)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
	}
	past := []unix.Timespec{unix.NsecToTimespec(1e9), unix.NsecToTimespec(1e9)}
	return []probe{
		{name: "socket-udp", run: sock(unix.AF_INET, unix.SOCK_DGRAM, 0)},
		{name: "socket-mptcp", run: sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP)},
		{name: "socket-unix", run: sock(unix.AF_UNIX, unix.SOCK_STREAM, 0)},
		{name: "socketpair", run: func() error {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err == nil {
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
			return err
		}},
		{name: "accept4-badfd", run: func() error { _, _, err := unix.Accept4(-1, 0); return err }},
		{name: "connect-badfd", run: func() error { return unix.Connect(-1, &unix.SockaddrUnix{Name: "/x"}) }},
		// Peeking into a process this one does not trace fails with ESRCH
		// when ptrace is allowed, so the probe cannot stop anything.
		{name: "ptrace-peek", run: func() error {
			return errno(unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, uintptr(os.Getppid()), 0, 0, 0, 0))
		}},
		{name: "process_vm_readv", run: func() error {
			return errno(unix.Syscall6(unix.SYS_PROCESS_VM_READV, uintptr(os.Getppid()), 0, 0, 0, 0, 0))
		}},
		{name: "unshare-user", run: func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
		// CLONE_THREAD with CLONE_NEWUSER is invalid, so without the
		// filter this clone fails (EINVAL) instead of starting a child.
		{name: "clone-newuser", run: func() error {
			return errno(unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_THREAD, 0, 0))
		}},
		{name: "clone3", run: func() error { return errno(unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)) }},
		{name: "io_uring_setup", run: func() error { return errno(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)) }},
		{name: "bpf", run: func() error { return errno(unix.Syscall(unix.SYS_BPF, 0, 0, 0)) }},
		{name: "keyctl", run: func() error { return errno(unix.Syscall(unix.SYS_KEYCTL, 0, 0, 0)) }},
		// A mount point that does not exist: ENOENT when mount is allowed.
		{name: "mount", run: func() error { return unix.Mount("none", "/nonexistent-fsmcp", "tmpfs", 0, "") }},
		{name: "personality", run: func() error { return errno(unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)) }},
		{name: "unknown-syscall", run: func() error { return errno(unix.Syscall(1000, 0, 0, 0)) }},
		{name: "ioctl-tiocsti", run: func() error {
			c := byte('x')
			return errno(unix.Syscall(unix.SYS_IOCTL, 2, unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
		}},
		{name: "ioctl-tiocsti-high", run: func() error {
			c := byte('x')
			return errno(unix.Syscall(unix.SYS_IOCTL, 2, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
		}},
		// The same calls with other arguments still work.
		{name: "ioctl-tcgets", run: func() error { _, err := unix.IoctlGetTermios(2, unix.TCGETS); return err }},
		{name: "utimensat-null", run: func() error { return futimens(file) }},
		{name: "prctl-dumpable", run: func() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) }},
		{name: "get-dumpable", run: func() error {
			v, _, e := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_DUMPABLE, 0, 0)
			if e != 0 {
				return e
			}
			return fmt.Errorf("dumpable=%d", v)
		}},
		{name: "chmod", run: func() error { return unix.Fchmodat(unix.AT_FDCWD, file, 0o777, 0) }},
		{name: "chown", run: func() error { return unix.Fchownat(unix.AT_FDCWD, file, os.Getuid(), os.Getgid(), 0) }},
		{name: "utimensat-path", run: func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, file, past, 0) }},
		{name: "setxattr", run: func() error { return unix.Setxattr(file, "user.fsmcp", []byte("evil"), 0) }},
		{name: "lsetxattr", run: func() error { return unix.Lsetxattr(file, "user.fsmcp", []byte("evil"), 0) }},
		{name: "removexattr", run: func() error { return unix.Removexattr(file, "user.fsmcp") }},
		{name: "getxattr", run: func() error { _, err := unix.Getxattr(file, "user.fsmcp", make([]byte, 64)); return err }},
		{name: "mknodat-fifo", run: func() error { return unix.Mknodat(unix.AT_FDCWD, filepath.Join(dir, "fifo"), unix.S_IFIFO|0o600, 0) }},
		{name: "symlinkat", run: func() error { return unix.Symlinkat("file", unix.AT_FDCWD, filepath.Join(dir, "link")) }},
		// Descriptor-based metadata, as metadata preservation does it on
		// the new file of an atomic write, keeps working.
		{name: "fd-ops", run: func() error { return fdOps(dir) }},
		{name: "exec-true", run: func() error { return exec.Command("/bin/true").Run() }},
	}
}

// futimens sets a file's times through a descriptor: utimensat with a
// NULL path, which the filter allows (Go's library offers no futimens).
// The times it sets are the file's own, read first, so nothing changes.
func futimens(file string) error {
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		return err
	}
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ts := [2]unix.Timespec{st.Atim, st.Mtim}
	return errno(unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0))
}

// fdOps creates a file the way an atomic write does and changes its
// metadata through descriptors only.
func fdOps(parent string) error {
	dir, err := os.MkdirTemp(parent, "ops")
	if err != nil {
		return fmt.Errorf("mkdir: %v", err)
	}
	tmp := filepath.Join(dir, "tmp")
	fd, err := unix.Open(tmp, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open: %v", err)
	}
	defer unix.Close(fd)
	steps := []struct {
		op  string
		err error
	}{
		{"write", func() error { _, err := unix.Write(fd, []byte("x")); return err }()},
		{"fchmod", unix.Fchmod(fd, 0o640)},
		{"fchown", unix.Fchown(fd, os.Getuid(), os.Getgid())},
		{"fsync", unix.Fsync(fd)},
		{"fdatasync", unix.Fdatasync(fd)},
		{"renameat2", unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, filepath.Join(dir, "renamed"), unix.RENAME_NOREPLACE)},
		{"linkat", unix.Linkat(unix.AT_FDCWD, filepath.Join(dir, "renamed"), unix.AT_FDCWD, filepath.Join(dir, "linked"), 0)},
		{"unlinkat", unix.Unlinkat(unix.AT_FDCWD, filepath.Join(dir, "linked"), 0)},
		{"mkdirat", unix.Mkdirat(unix.AT_FDCWD, filepath.Join(dir, "sub"), 0o700)},
	}
	for _, s := range steps {
		if s.err != nil {
			return fmt.Errorf("%s: %v", s.op, s.err)
		}
	}
	// xattrs need file system support; only an EPERM is the filter's.
	if err := unix.Fsetxattr(fd, "user.fsmcp", []byte("v"), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("fsetxattr: %v", err)
	}
	if _, err := unix.Flistxattr(fd, make([]byte, 256)); err != nil && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("flistxattr: %v", err)
	}
	return nil
}

// probeChild runs the test named test in a subprocess with env added and
// returns the "probe KEY=VALUE" lines it printed, and its whole output.
func probeChild(t *testing.T, test string, env []string, attr *syscall.SysProcAttr) (map[string]string, []byte) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "probe "); ok {
			k, v, _ := strings.Cut(rest, "=")
			got[k] = v
		}
	}
	return got, out
}

// runFiltered runs TestSeccompChild in a subprocess under mode's filter
// and returns its probe results.
func runFiltered(t *testing.T, mode, dir string) map[string]string {
	t.Helper()
	got, out := probeChild(t, "TestSeccompChild", []string{childEnv + "=" + mode, childEnv + "_DIR=" + dir}, nil)
	if got["install"] != "ok" || got["mode"] != "filter" || got["denied"] == "" {
		t.Fatalf("install: %s\n%s", got["install"], out)
	}
	return got
}

// outsideFile makes the file the probes attack, with an extended
// attribute when the file system supports one.
func outsideFile(t *testing.T) (dir string, snapshot func() string) {
	dir = t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = unix.Setxattr(file, "user.keep", []byte("original"), 0)
	return dir, func() string {
		var st unix.Stat_t
		if err := unix.Stat(file, &st); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1024)
		n, _ := unix.Listxattr(file, buf)
		return fmt.Sprintf("mode=%o uid=%d gid=%d mtime=%v atime=%v xattrs=%q",
			st.Mode, st.Uid, st.Gid, st.Mtim, st.Atim, buf[:max(n, 0)])
	}
}

func checkProbes(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s under the filter = %s, want %s", name, got[name], w)
		}
	}
}

// The refusals every filter shares, as errno names.
var sharedRefusals = map[string]string{
	"socket-udp": "EPERM", "socket-mptcp": "EPERM", "socket-unix": "EPERM", "socketpair": "EPERM",
	"connect-badfd": "EPERM", "ptrace-peek": "EPERM", "process_vm_readv": "EPERM",
	"unshare-user": "EPERM", "clone-newuser": "EPERM", "clone3": "ENOSYS",
	"io_uring_setup": "EPERM", "bpf": "EPERM", "keyctl": "EPERM", "mount": "EPERM",
	"personality": "EPERM", "unknown-syscall": "EPERM", "ioctl-tiocsti": "EPERM",
	"ioctl-tiocsti-high": "EPERM", "prctl-dumpable": "EPERM", "get-dumpable": "dumpable=0",
	"chmod": "EPERM", "chown": "EPERM", "utimensat-path": "EPERM", "setxattr": "EPERM",
	"lsetxattr": "EPERM", "removexattr": "EPERM", "getxattr": "EPERM", "mknodat-fifo": "EPERM",
	"symlinkat": "EPERM", "fd-ops": "ok", "ioctl-tcgets": "ENOTTY", "utimensat-null": "ok",
	"thread0-socket": "EPERM", "thread1-socket": "EPERM", "thread2-socket": "EPERM", "thread3-socket": "EPERM",
}

func TestSeccompWorker(t *testing.T) {
	dir, snapshot := outsideFile(t)
	before := snapshot()
	got := runFiltered(t, "worker", dir)
	want := maps(sharedRefusals, map[string]string{"accept4-badfd": "EPERM", "exec-true": "ok"})
	checkProbes(t, got, want)
	if after := snapshot(); after != before {
		t.Errorf("the filtered process changed the file's metadata:\nbefore %s\nafter  %s", before, after)
	}
}

func TestSeccompFrontend(t *testing.T) {
	dir, snapshot := outsideFile(t)
	before := snapshot()
	got := runFiltered(t, "frontend", dir)
	checkProbes(t, got, maps(sharedRefusals, map[string]string{"accept4-badfd": "EPERM", "exec-true": "EPERM"}))
	got = runFiltered(t, "frontend-listener", dir)
	checkProbes(t, got, maps(sharedRefusals, map[string]string{"accept4-badfd": "EBADF", "exec-true": "EPERM"}))
	if after := snapshot(); after != before {
		t.Errorf("the filtered process changed the file's metadata:\nbefore %s\nafter  %s", before, after)
	}
}

func maps(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// run evaluates the installed filters on one system call the way the
// kernel does (every filter runs, the strictest answer wins), in
// x/net/bpf's interpreter. That interpreter loads words big-endian, as
// from a packet, so each 32-bit word of seccomp_data is laid out at its
// native offset but written big-endian.
func run(t *testing.T, filters []filter, auditArch uint32, nr uint32, args ...uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	put := func(off int, v uint32) { binary.BigEndian.PutUint32(data[off:], v) }
	put(0, nr)
	put(4, auditArch)
	for i, a := range args {
		lo, hi := 16+8*i, 16+8*i+4
		if nativeBigEndian() {
			lo, hi = hi, lo
		}
		put(lo, uint32(a))
		put(hi, uint32(a>>32))
	}
	verdict := uint32(unix.SECCOMP_RET_ALLOW)
	for _, f := range filters {
		insts, err := f.policy.Assemble()
		if err != nil {
			t.Fatal(err)
		}
		vm, err := bpf.NewVM(insts)
		if err != nil {
			t.Fatal(err)
		}
		out, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if int32(uint32(out)&unix.SECCOMP_RET_ACTION_FULL) < int32(verdict&unix.SECCOMP_RET_ACTION_FULL) {
			verdict = uint32(out)
		}
	}
	return verdict
}

func nativeBigEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 0
}

// The assembled filters, run in an interpreter on every system call the
// table knows and on the edges: another ABI, x32, numbers past the table,
// and the argument checks.
func TestSeccompProgram(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skipf("no system call table for %s: %v", runtime.GOARCH, err)
	}
	const (
		allow     = unix.SECCOMP_RET_ALLOW
		eperm     = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosysRet = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	filters, refused := policies(info, workerDeny())
	native := uint32(info.ID)
	for name, nr := range info.SyscallNames {
		want := uint32(allow)
		switch {
		case slices.Contains(enosys, name):
			want = enosysRet
		case slices.Contains(refused, name) && !isConditional(name):
			want = eperm
		}
		if got := run(t, filters, native, uint32(nr)); got != want {
			t.Errorf("%s: filter answers %#x, want %#x", name, got, want)
		}
	}
	nr := func(name string) uint32 { return uint32(info.SyscallNames[name]) }
	// AT_FDCWD (-100) as the register holds it.
	const atFDCWD = 1<<64 - 100
	cases := []struct {
		what string
		arch uint32
		nr   uint32
		args []uint64
		want uint32
	}{
		{"i386 socket (int 0x80)", uint32(arch.I386.ID), uint32(arch.I386.SyscallNames["socket"]), nil, eperm},
		{"i386 getpid (int 0x80)", uint32(arch.I386.ID), uint32(arch.I386.SyscallNames["getpid"]), nil, eperm},
		{"number past the table", native, 1000, nil, eperm},
		{"utimensat with a path", native, nr("utimensat"), []uint64{atFDCWD, 0x7f0000001000}, eperm},
		{"utimensat on a descriptor", native, nr("utimensat"), []uint64{3, 0}, allow},
		{"clone of a thread", native, nr("clone"), []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM}, allow},
		{"clone of os/exec", native, nr("clone"), []uint64{unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_PIDFD | uint64(unix.SIGCHLD)}, allow},
		{"clone into a user namespace", native, nr("clone"), []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, eperm},
		{"clone into a network namespace", native, nr("clone"), []uint64{unix.CLONE_NEWNET | uint64(unix.SIGCHLD)}, eperm},
		{"ioctl TCGETS", native, nr("ioctl"), []uint64{1, unix.TCGETS}, allow},
		{"ioctl TIOCSTI", native, nr("ioctl"), []uint64{2, unix.TIOCSTI}, eperm},
		{"ioctl TIOCSTI with high bits", native, nr("ioctl"), []uint64{2, 1<<32 | unix.TIOCSTI}, eperm},
		{"ioctl TIOCLINUX", native, nr("ioctl"), []uint64{2, unix.TIOCLINUX}, eperm},
		{"prctl PR_SET_PDEATHSIG", native, nr("prctl"), []uint64{unix.PR_SET_PDEATHSIG, 9}, allow},
		{"prctl PR_SET_DUMPABLE", native, nr("prctl"), []uint64{unix.PR_SET_DUMPABLE, 1}, eperm},
	}
	if info.ID == arch.X86_64.ID {
		cases = append(cases, struct {
			what string
			arch uint32
			nr   uint32
			args []uint64
			want uint32
		}{"x32 socket", native, uint32(arch.X32.SyscallNames["socket"]) | 0x40000000, nil, enosysRet})
	}
	for _, c := range cases {
		if got := run(t, filters, c.arch, c.nr, c.args...); got != c.want {
			t.Errorf("%s: filter answers %#x, want %#x", c.what, got, c.want)
		}
	}
}
