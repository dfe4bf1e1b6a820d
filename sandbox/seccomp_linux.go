package sandbox

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
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
func conditional() []seccomp.NameWithConditions {
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
		{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: nsFlags}}},
		// TIOCSTI and TIOCLINUX push input into a terminal, and stderr may
		// be the user's: Landlock's ioctl rule does not cover an inherited
		// descriptor.
		{Name: "ioctl", Conditions: eq(1, unix.TIOCSTI)},
		{Name: "ioctl", Conditions: eq(1, unix.TIOCLINUX)},
		{Name: "ioctl", Conditions: high(1)},
		// prctl(PR_SET_DUMPABLE) would undo non-dumpable.
		{Name: "prctl", Conditions: eq(0, unix.PR_SET_DUMPABLE)},
		{Name: "prctl", Conditions: high(0)},
	}
}

// errnoENOSYS is the action of the enosys list. The library answers
// ActionErrno with EPERM; an errno in the low bits is passed through.
const errnoENOSYS = seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)

// policies builds the filters refusing deny on the architecture info.
// The first holds the hot system calls (allowed, checked first for
// speed), the refusals, the ENOSYS refusals, and every other system call
// the table knows (allowed); anything else, another ABI included, gets
// EPERM. Each conditional system call gets a filter of its own that allows
// everything else: the library's argument checks leave an argument, not
// the system call number, in the accumulator, so no other comparison may
// follow them in the same program. The kernel runs every filter and takes
// the strictest answer. It also returns the refused names, sorted.
func policies(info *arch.Info, deny []string) ([]seccomp.Policy, []string) {
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
	enosysG := pick(enosys, refuse)
	var conds []seccomp.Policy
	for _, c := range conditional() {
		if _, known := info.SyscallNames[c.Name]; !known || verdict[c.Name] == refuse {
			continue
		}
		if verdict[c.Name] == refuseSome {
			// Another set of conditions for the same call: same filter.
			g := &conds[len(conds)-1].Syscalls[0]
			g.NamesWithCondtions = append(g.NamesWithCondtions, c)
			continue
		}
		verdict[c.Name] = refuseSome
		conds = append(conds, seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				NamesWithCondtions: []seccomp.NameWithConditions{c},
				Action:             seccomp.ActionErrno,
			}},
		})
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
	main := seccomp.Policy{
		DefaultAction: seccomp.ActionErrno,
		Syscalls: []seccomp.SyscallGroup{
			{Names: hotG, Action: seccomp.ActionAllow},
			{Names: denyG, Action: seccomp.ActionErrno},
			{Names: enosysG, Action: errnoENOSYS},
			{Names: allowG, Action: seccomp.ActionAllow},
		},
	}
	return append([]seccomp.Policy{main}, conds...), refused
}

func install(deny []string) (Seccomp, error) {
	none := Seccomp{Mode: "none"}
	info, err := arch.GetInfo("")
	if err != nil || info.SyscallNames == nil {
		return none, fmt.Errorf("%w: no system call table for %s", ErrNoSeccomp, runtime.GOARCH)
	}
	if !seccomp.Supported() {
		return none, ErrNoSeccomp
	}
	pols, refused := policies(info, deny)
	// no_new_privs and the filter are per thread until TSYNC copies them
	// to the others: keep the calls on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return none, fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	flags := seccomp.FilterFlagTSync | seccomp.FilterFlagLog
	for i, pol := range pols {
		f := seccomp.Filter{NoNewPrivs: true, Flag: flags, Policy: pol}
		err := seccomp.LoadFilter(f)
		if i == 0 && errors.Is(err, unix.EINVAL) {
			// A kernel older than 4.14 knows no log flag.
			flags = seccomp.FilterFlagTSync
			f.Flag = flags
			err = seccomp.LoadFilter(f)
		}
		if err != nil {
			return none, fmt.Errorf("seccomp: %w", err)
		}
	}
	// When TSYNC cannot synchronise a thread, seccomp attaches nothing and
	// returns that thread's id, which the library does not read as a
	// failure. Check that the filter is in force instead of assuming it.
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
		return none, errors.New("BUG(fsmcp): seccomp filter installed but socket() still allowed")
	}
	if !errors.Is(err, unix.EPERM) {
		return none, fmt.Errorf("BUG(fsmcp): seccomp filter probe: socket() = %w, want EPERM", err)
	}
	return Seccomp{Mode: "filter", Denied: len(refused), Syscalls: refused}, nil
}
