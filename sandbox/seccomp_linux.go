package sandbox

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// FilterWorker installs the worker's seccomp filter on every thread of the
// calling process (TSYNC), inherited by every process it starts: no new
// sockets, no ptrace, no namespaces or mounts, no metadata change by path
// (see denyAlways). It first sets no_new_privs and makes the process
// non-dumpable, so that no other process of the same user can ptrace it,
// read its memory or make it dump core. Denials return EPERM and are
// recorded by the kernel's audit log. Call it after the worker's sockets
// and files are open and Landlock is on, before the first RPC.
//
// It does not prevent what a filter cannot see (see Seccomp), and rg
// becomes dumpable again when it is exec'd, as every exec'd program does.
func FilterWorker() (Seccomp, error) {
	return install(workerDeny())
}

// FilterFrontend installs the front-end's seccomp filter, like
// FilterWorker: no new sockets, no exec, and the same refusals as the
// worker. With listener true, accept and accept4 stay allowed for a
// listening socket opened before the call; without, they are refused too.
func FilterFrontend(listener bool) (Seccomp, error) {
	return install(frontendDeny(listener))
}

func workerDeny() []string {
	return concat(denyAlways, denyNetwork, denyAccept)
}

func frontendDeny(listener bool) []string {
	d := concat(denyAlways, denyNetwork, denyExec)
	if !listener {
		d = append(d, denyAccept...)
	}
	return d
}

func concat(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// nsFlags are the clone flags that create namespaces: clone with any of
// them is unshare by another name.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// conditional lists the system calls refused (EPERM) only for some
// arguments. A set of conditions matches when all of them hold; a system
// call is refused when any of its sets matches.
func conditional() []seccomp.NameWithConditions { return conditionalNS(nsFlags) }

// conditionalNS is conditional with clone refused for the namespace flags
// cloneNS: the command runner may create the namespaces each command
// gets, nothing else may.
func conditionalNS(cloneNS uint64) []seccomp.NameWithConditions {
	// The kernel reads ioctl's request and prctl's option as 32-bit, so a
	// value with high bits set would reach the same command while
	// comparing unequal: refuse those outright (no caller sets them).
	high := func(arg uint32) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{{Argument: arg, Operation: seccomp.GreaterThan, Value: math.MaxUint32}}
	}
	eq := func(arg uint32, v uint64) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{{Argument: arg, Operation: seccomp.Equal, Value: v}}
	}
	return []seccomp.NameWithConditions{
		// utimensat with a path sets times by name, outside the root too;
		// with a NULL path it is futimens on a descriptor the process
		// already holds, which is all a write needs.
		{Name: "utimensat", Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.NotEqual, Value: 0}}},
		// clone into new namespaces. Threads and os/exec never ask for it.
		{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNS}}},
		// TIOCSTI and TIOCLINUX push input into a terminal, and stderr may
		// be the user's: Landlock's ioctl rule does not cover an inherited
		// descriptor.
		{Name: "ioctl", Conditions: eq(1, unix.TIOCSTI)},
		{Name: "ioctl", Conditions: eq(1, unix.TIOCLINUX)},
		{Name: "ioctl", Conditions: high(1)},
		// prctl(PR_SET_DUMPABLE) would undo non-dumpable.
		{Name: "prctl", Conditions: eq(0, unix.PR_SET_DUMPABLE)},
		{Name: "prctl", Conditions: high(0)},
		// An open whose access mode is 3 (O_ACCMODE, neither read nor
		// write) needs no Landlock right, yet gives a descriptor that
		// fchmod, fchown, fsetxattr and futimens accept: refused outright.
		// creat has no flags (it always writes), and openat2, whose
		// flags are in memory, is refused with ENOSYS (see enosys).
		{Name: "open", Conditions: accessMode3(1)},
		{Name: "openat", Conditions: accessMode3(2)},
	}
}

// accessMode3 matches open flags in argument arg whose access mode is 3:
// both O_ACCMODE bits set (the library's BitsSet is "any of").
func accessMode3(arg uint32) seccomp.ArgumentConditions {
	return seccomp.ArgumentConditions{
		{Argument: arg, Operation: seccomp.BitsSet, Value: unix.O_WRONLY},
		{Argument: arg, Operation: seccomp.BitsSet, Value: unix.O_RDWR},
	}
}

// commandIoctls are the ioctl requests that change a regular file's
// metadata through a descriptor (attribute flags, the project id and
// extended flags, the inode generation), refused for commands on top of
// conditional's. The worker needs FS_IOC_SETFLAGS itself, to keep a
// file's flags across an atomic write. The 32-bit numbers reach the same
// handlers through compat paths on some file systems.
var commandIoctls = []uint64{
	iow('f', 2, 8), iow('f', 2, 4), // FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS
	iow('X', 32, 28),               // FS_IOC_FSSETXATTR (struct fsxattr)
	iow('v', 2, 8), iow('v', 2, 4), // FS_IOC_SETVERSION, FS_IOC32_SETVERSION
}

// iow is the kernel's _IOW(typ, nr, size) in the generic encoding of
// x86 and arm, the CPUs fsmcp has system call tables for.
func iow(typ, nr, size uint64) uint64 { return 1<<30 | size<<16 | typ<<8 | nr }

// commandConditional is conditionalNS with commandIoctls refused, and
// fchmod of a set-user-ID or set-group-ID bit: under --exec-writable a
// command may change the mode of the root's files, which belong to the
// operator (root, often), and a set-user-ID file there would run as its
// owner for anyone on the host. (Mounts are nosuid only in the command's
// view.) chmod by path is refused (commandDeny) but with --exec-native
// and a read-only root, and then with a set-id bit. socketpair is refused
// but for the unix family.
func commandConditional(cloneNS uint64, writable, native bool) []seccomp.NameWithConditions {
	setID := func(arg uint32) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{{Argument: arg, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}
	}
	c := append(conditionalNS(cloneNS), seccomp.NameWithConditions{Name: "fchmod", Conditions: setID(1)},
		seccomp.NameWithConditions{Name: "socketpair",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX}}})
	if nativeChmod(writable, native) {
		c = append(c, seccomp.NameWithConditions{Name: "chmod", Conditions: setID(1)},
			seccomp.NameWithConditions{Name: "fchmodat", Conditions: setID(2)},
			seccomp.NameWithConditions{Name: "fchmodat2", Conditions: setID(2)})
	}
	for _, r := range commandIoctls {
		c = append(c, seccomp.NameWithConditions{Name: "ioctl",
			Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.Equal, Value: r}}})
	}
	return c
}

// errnoENOSYS is the action of the enosys list. The library answers
// ActionErrno with EPERM; an errno in the low bits is passed through.
const errnoENOSYS = seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)

// filter is one seccomp program and whether the kernel's audit log records
// what it refuses.
type filter struct {
	policy seccomp.Policy
	log    bool
}

// policies builds the filters refusing deny on the architecture info, in
// the order they are to be installed. The kernel runs every filter and
// takes the strictest answer; of equal answers, the last-installed
// filter's, whose log flag then decides whether it is audited.
//
//   - The main filter: the hot system calls (allowed, checked first for
//     speed), the refusals, and every other system call the table knows
//     (allowed); anything else, another ABI included, gets EPERM. Logged.
//   - One filter per conditional system call, allowing everything else:
//     the library's argument checks leave an argument, not the system call
//     number, in the accumulator, so no other comparison may follow them
//     in the same program. Logged.
//   - Last, the ENOSYS refusals. Not logged: glibc tries clone3 for every
//     thread rg starts, and that expected answer would bury real refusals.
//
// It also returns the refused names, sorted.
func policies(info *arch.Info, deny []string) ([]filter, []string) {
	return policiesCond(info, deny, conditional())
}

// policiesCond is policies with cond as the conditional refusals.
func policiesCond(info *arch.Info, deny []string, cond []seccomp.NameWithConditions) ([]filter, []string) {
	const (
		refuse = iota + 1
		refuseSome
		allowFirst
	)
	verdict := map[string]int{}
	pick := func(names []string, v int) []string {
		var out []string
		for _, n := range names {
			if _, known := info.SyscallNames[n]; known && verdict[n] == 0 {
				verdict[n] = v
				out = append(out, n)
			}
		}
		return out
	}
	denyG := pick(deny, refuse)
	enosysG := pick(enosys, refuseSome)
	var conds []filter
	index := map[string]int{}
	for _, c := range cond {
		if _, known := info.SyscallNames[c.Name]; !known || verdict[c.Name] == refuse {
			continue
		}
		if i, ok := index[c.Name]; ok {
			// Another set of conditions for the same call: same filter.
			g := &conds[i].policy.Syscalls[0]
			g.NamesWithCondtions = append(g.NamesWithCondtions, c)
			continue
		}
		verdict[c.Name] = refuseSome
		index[c.Name] = len(conds)
		conds = append(conds, filter{log: true, policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				NamesWithCondtions: []seccomp.NameWithConditions{c},
				Action:             seccomp.ActionErrno,
			}},
		}})
	}
	hotG := pick(hot, allowFirst)
	var allowG, refused []string
	for n := range info.SyscallNames {
		switch verdict[n] {
		case 0:
			allowG = append(allowG, n)
		case refuseSome:
			allowG = append(allowG, n)
			refused = append(refused, n)
		case refuse:
			refused = append(refused, n)
		}
	}
	sort.Strings(allowG)
	sort.Strings(refused)
	main := filter{log: true, policy: seccomp.Policy{
		DefaultAction: seccomp.ActionErrno,
		Syscalls: []seccomp.SyscallGroup{
			{Names: hotG, Action: seccomp.ActionAllow},
			{Names: denyG, Action: seccomp.ActionErrno},
			{Names: allowG, Action: seccomp.ActionAllow},
		},
	}}
	all := append([]filter{main}, conds...)
	if len(enosysG) > 0 {
		all = append(all, filter{policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls:      []seccomp.SyscallGroup{{Names: enosysG, Action: errnoENOSYS}},
		}})
	}
	return all, refused
}

func install(deny []string) (Seccomp, error) { return installCond(deny, conditional(), true) }

// installCond is install with cond as the conditional refusals, on every
// thread (tsync) or only the calling one, which must then be locked to
// its goroutine.
func installCond(deny []string, cond []seccomp.NameWithConditions, tsync bool) (Seccomp, error) {
	none := Seccomp{Mode: "none"}
	info, err := arch.GetInfo("")
	if err != nil || info.SyscallNames == nil {
		return none, fmt.Errorf("%w: no system call table for %s", ErrNoSeccomp, runtime.GOARCH)
	}
	if !seccomp.Supported() {
		return none, ErrNoSeccomp
	}
	filters, refused := policiesCond(info, deny, cond)
	// no_new_privs and each filter are per thread until TSYNC copies them
	// to the others: keep the calls on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A command's thread executes next, and exec makes it dumpable
	// again: only a process that keeps running is made non-dumpable.
	if tsync {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return none, fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return none, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS, 1): %w", err)
	}
	logFlag := uintptr(unix.SECCOMP_FILTER_FLAG_LOG)
	tsyncFlag := uintptr(0)
	if tsync {
		tsyncFlag = unix.SECCOMP_FILTER_FLAG_TSYNC
	}
	for i, f := range filters {
		flags := tsyncFlag
		if f.log {
			flags |= logFlag
		}
		err := load(f.policy, flags)
		if i == 0 && errors.Is(err, unix.EINVAL) {
			// A kernel older than 4.14 knows no log flag.
			logFlag = 0
			err = load(f.policy, tsyncFlag)
		}
		if err != nil {
			return none, fmt.Errorf("seccomp: %w", err)
		}
	}
	return Seccomp{Mode: "filter", Denied: len(refused), Syscalls: refused}, nil
}

// load assembles pol with the library and attaches it to every thread.
// It calls seccomp(2) itself because, when TSYNC cannot synchronise a
// thread, the kernel attaches nothing and returns that thread's id rather
// than an error, which the library's loader does not check.
func load(pol seccomp.Policy, flags uintptr) error {
	insts, err := pol.Assemble()
	if err != nil {
		return err
	}
	return loadBPF(insts, flags)
}

// loadBPF attaches the program insts as load does.
func loadBPF(insts []bpf.Instruction, flags uintptr) error {
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return err
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno != 0:
		return errno
	case tid != 0:
		return fmt.Errorf("thread %d cannot take the filter (TSYNC)", tid)
	}
	return nil
}
