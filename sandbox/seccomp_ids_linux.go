package sandbox

import (
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A command's filter refuses every set*id call (denyAlways), but some
// programs make them to set the ids they already have: glibc's
// posix_spawn with POSIX_SPAWN_RESETIDS, which GNU make asks for, calls
// setresuid(-1, getuid(), -1) and setresgid(-1, getgid(), -1) in the
// child, and an EPERM there fails every recipe line. Such a call changes
// nothing, and the kernel allows it without any privilege; the filter
// answers it with success (an errno of 0) without making it. Any other id
// is still refused with EPERM.
//
// The answer comes from a filter of its own, installed after the others:
// of equal actions (both are SECCOMP_RET_ERRNO), the kernel takes the
// most recently installed filter's, so its errno 0 prevails over EPERM,
// the runner's filters included. The seccomp library cannot express an
// errno of 0 (it turns it into EPERM), so the program is written here.

// sameIDCalls are the set*id calls answered, each with how many id
// arguments it takes and whether they are user or group ids.
var sameIDCalls = []struct {
	name  string
	nargs int
	group bool
}{
	{"setuid", 1, false}, {"setreuid", 2, false}, {"setresuid", 3, false}, {"setfsuid", 1, false},
	{"setgid", 1, true}, {"setregid", 2, true}, {"setresgid", 3, true}, {"setfsgid", 1, true},
}

// sameIDsProgram is the filter answering, with success, a set*id call
// whose every id argument is uid (gid for the group calls) or -1 ("leave
// it"), compared as the kernel reads them: the low 32 bits. Every other
// call, and any other architecture, it allows (leaving the verdict to the
// other filters).
func sameIDsProgram(info *arch.Info, uid, gid uint32) []bpf.Instruction {
	const (
		ret0  = unix.SECCOMP_RET_ERRNO // errno 0: the call returns 0
		allow = unix.SECCOMP_RET_ALLOW
	)
	// The low half of a 64-bit argument: first on a little-endian CPU,
	// which the audit architecture says.
	low := uint32(4)
	if info.ID&0x40000000 != 0 { // __AUDIT_ARCH_LE
		low = 0
	}
	// Each block: load the number, skip the block unless it matches,
	// then for each argument two comparisons, and the answer. allowAt
	// marks jumps to the final allow, patched once its place is known.
	var prog []bpf.Instruction
	var toAllow []int
	prog = append(prog, bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: allow})
	for _, c := range sameIDCalls {
		nr, ok := info.SyscallNames[c.name]
		if !ok {
			continue
		}
		id := uid
		if c.group {
			id = gid
		}
		body := 3*c.nargs + 1
		prog = append(prog, bpf.LoadAbsolute{Off: 0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: uint8(body)})
		for i := 0; i < c.nargs; i++ {
			prog = append(prog, bpf.LoadAbsolute{Off: 16 + 8*uint32(i) + low, Size: 4},
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: id, SkipTrue: 1},
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xffffffff})
			toAllow = append(toAllow, len(prog)-1)
		}
		prog = append(prog, bpf.RetConstant{Val: ret0})
	}
	prog = append(prog, bpf.RetConstant{Val: allow})
	end := len(prog) - 1
	for _, at := range toAllow {
		j := prog[at].(bpf.JumpIf)
		j.SkipFalse = uint8(end - at - 1)
		prog[at] = j
	}
	return prog
}

// filterSameIDs installs sameIDsProgram for the calling thread's own ids.
func filterSameIDs() error {
	info, err := arch.GetInfo("")
	if err != nil || info.SyscallNames == nil {
		return ErrNoSeccomp
	}
	return loadBPF(sameIDsProgram(info, uint32(unix.Getuid()), uint32(unix.Getgid())), 0)
}
