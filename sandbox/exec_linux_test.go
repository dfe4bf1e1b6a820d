package sandbox

import (
	"encoding/binary"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The command runner's and each command's filters, run in the BPF
// interpreter: the runner may make PID namespaces and nothing else new;
// a command may make none; neither may open a socket of any kind; a
// command may read extended attributes by path (ls -l) but change none.
func TestExecSeccompPrograms(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skipf("no system call table for this CPU: %v", err)
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	native := uint32(info.ID)
	nr := func(name string) uint32 { return uint32(info.SyscallNames[name]) }
	runner, _ := policiesCond(info, commandDeny(false, false), commandConditional(nsFlags&^commandNS, false, false))
	command, _ := policiesCond(info, commandDeny(false, false), commandConditional(nsFlags, false, false))
	fork := uint64(unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_PIDFD | uint64(unix.SIGCHLD))
	cases := []struct {
		what            string
		nr              uint32
		args            []uint64
		runner, command uint32
	}{
		{"clone into a PID namespace", nr("clone"), []uint64{fork | unix.CLONE_NEWPID}, allow, eperm},
		{"clone into a command's namespaces", nr("clone"), []uint64{fork | commandNS}, allow, eperm},
		{"clone into a user namespace", nr("clone"), []uint64{fork | unix.CLONE_NEWUSER}, allow, eperm},
		{"clone into a network namespace", nr("clone"), []uint64{fork | unix.CLONE_NEWNET}, eperm, eperm},
		{"clone into an IPC namespace", nr("clone"), []uint64{fork | commandNS | unix.CLONE_NEWIPC}, eperm, eperm},
		{"plain fork", nr("clone"), []uint64{fork}, allow, allow},
		{"unshare", nr("unshare"), []uint64{unix.CLONE_NEWUSER}, eperm, eperm},
		{"socket", nr("socket"), []uint64{unix.AF_INET, unix.SOCK_DGRAM}, eperm, eperm},
		{"socketpair", nr("socketpair"), []uint64{unix.AF_INET, unix.SOCK_STREAM}, eperm, eperm},
		{"socketpair of the unix family", nr("socketpair"), []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow, allow},
		{"socketpair with high bits", nr("socketpair"), []uint64{1<<32 | unix.AF_UNIX, unix.SOCK_STREAM}, eperm, eperm},
		{"connect", nr("connect"), []uint64{3}, eperm, eperm},
		{"mount", nr("mount"), nil, eperm, eperm},
		{"ptrace", nr("ptrace"), nil, eperm, eperm},
		{"memfd_create", nr("memfd_create"), nil, eperm, eperm},
		{"execveat", nr("execveat"), nil, eperm, eperm},
		{"chmod by path", nr("fchmodat"), nil, eperm, eperm},
		{"setxattr by path", nr("setxattr"), nil, eperm, eperm},
		{"getxattr by path", nr("getxattr"), nil, allow, allow},
		{"listxattr by path", nr("llistxattr"), nil, allow, allow},
		{"execve", nr("execve"), nil, allow, allow},
		{"io_uring_setup", nr("io_uring_setup"), nil, eperm, eperm},
	}
	for _, c := range cases {
		if got := run(t, runner, native, c.nr, c.args...); got != c.runner {
			t.Errorf("runner: %s answers %#x, want %#x", c.what, got, c.runner)
		}
		if got := run(t, command, native, c.nr, c.args...); got != c.command {
			t.Errorf("command: %s answers %#x, want %#x", c.what, got, c.command)
		}
	}
	if n := CommandSeccompDenied(false, false); n < 100 {
		t.Errorf("CommandSeccompDenied(false, false) = %d", n)
	}
}

// TestCommandFilterNativeChmod: chmod by path is allowed, without set-id
// bits, only to native commands of a read-only root.
func TestCommandFilterNativeChmod(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skipf("no system call table for this CPU: %v", err)
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	cpu := uint32(info.ID)
	nr := func(name string) uint32 { return uint32(info.SyscallNames[name]) }
	for _, c := range []struct {
		writable, native bool
		plain, setID     uint32
	}{
		{false, false, eperm, eperm},
		{true, false, eperm, eperm},
		{true, true, eperm, eperm},
		{false, true, allow, eperm},
	} {
		for _, filter := range []struct {
			what string
			ns   uint64
		}{{"runner", nsFlags &^ commandNS}, {"command", nsFlags}} {
			prog, _ := policiesCond(info, commandDeny(c.writable, c.native), commandConditional(filter.ns, c.writable, c.native))
			for _, call := range []struct {
				name string
				mode int
			}{{"chmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}} {
				if _, ok := info.SyscallNames[call.name]; !ok {
					continue
				}
				args := []uint64{0, 0, 0}
				args[call.mode] = 0o755
				if got := run(t, prog, cpu, nr(call.name), args...); got != c.plain {
					t.Errorf("%s writable=%v native=%v: %s 0755 answers %#x, want %#x", filter.what, c.writable, c.native, call.name, got, c.plain)
				}
				args[call.mode] = 0o4755
				if got := run(t, prog, cpu, nr(call.name), args...); got != c.setID {
					t.Errorf("%s writable=%v native=%v: %s 04755 answers %#x, want %#x", filter.what, c.writable, c.native, call.name, got, c.setID)
				}
			}
		}
	}
}

// TestSameIDsProgram: a set*id call to the caller's own ids (or -1) is
// answered with success, any other id left to the other filters' EPERM.
func TestSameIDsProgram(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skipf("no system call table for this CPU: %v", err)
	}
	const uid, gid, minus1 = 65534, 65533, 0xffffffff
	vm, err := bpf.NewVM(sameIDsProgram(info, uid, gid))
	if err != nil {
		t.Fatal(err)
	}
	nr := func(name string) uint32 { return uint32(info.SyscallNames[name]) }
	ret0, allow := uint32(unix.SECCOMP_RET_ERRNO), uint32(unix.SECCOMP_RET_ALLOW)
	for _, c := range []struct {
		what string
		arch uint32
		nr   uint32
		args []uint64
		want uint32
	}{
		{"setresuid(-1, own, -1)", uint32(info.ID), nr("setresuid"), []uint64{minus1, uid, minus1}, ret0},
		{"setresgid(-1, own, -1)", uint32(info.ID), nr("setresgid"), []uint64{minus1, gid, minus1}, ret0},
		{"setuid(own)", uint32(info.ID), nr("setuid"), []uint64{uid}, ret0},
		{"setuid(0)", uint32(info.ID), nr("setuid"), []uint64{0}, allow},
		{"setresuid(-1, 0, -1)", uint32(info.ID), nr("setresuid"), []uint64{minus1, 0, minus1}, allow},
		{"setresuid(own, own, 0)", uint32(info.ID), nr("setresuid"), []uint64{uid, uid, 0}, allow},
		{"setresgid with the uid", uint32(info.ID), nr("setresgid"), []uint64{uid, uid, uid}, allow},
		{"setreuid(own, own)", uint32(info.ID), nr("setreuid"), []uint64{uid, uid}, ret0},
		{"another architecture", uint32(info.ID) ^ 1, nr("setuid"), []uint64{uid}, allow},
		{"getpid", uint32(info.ID), nr("getpid"), nil, allow},
	} {
		data := make([]byte, 64)
		put := func(off int, v uint32) { binary.BigEndian.PutUint32(data[off:], v) }
		put(0, c.nr)
		put(4, c.arch)
		for i, a := range c.args {
			lo, hi := 16+8*i, 16+8*i+4
			if nativeBigEndian() {
				lo, hi = hi, lo
			}
			put(lo, uint32(a))
			put(hi, uint32(a>>32))
		}
		out, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if uint32(out) != c.want {
			t.Errorf("%s answers %#x, want %#x", c.what, out, c.want)
		}
	}
}
