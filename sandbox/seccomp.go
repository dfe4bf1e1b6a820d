package sandbox

import "errors"

// ErrNoSeccomp is returned when no seccomp filter can be installed: the
// kernel lacks seccomp, or fsmcp has no system call table for the CPU.
var ErrNoSeccomp = errors.New("seccomp filters are not available")

// Seccomp is what a seccomp filter installation enforced.
//
// A filter sees system call numbers and register arguments only, never the
// memory they point to: it cannot tell one path from another. It does not
// stop stat, readlink or access of paths outside the root (Landlock does
// not cover those either), and it leaves write, rename, link and unlink to
// Landlock and os.Root.
type Seccomp struct {
	// Mode is "filter" once a filter is installed, else "none".
	Mode string
	// Denied counts this architecture's system calls the filter refuses,
	// always or for some arguments.
	Denied int
	// Syscalls names them, sorted, for the start-up log and tests.
	Syscalls []string
}

// The filters are deny-lists over the system call table the seccomp
// library knows for the CPU, closed at both edges: a number missing from
// that table (a system call newer than the library) and any other ABI (the
// i386 and x32 entry points of an amd64 kernel) are refused too.
//
// Why not an allow-list: measured with strace over the test suite, the
// confined worker makes 58 distinct system calls and rg 35, about seventy
// together. Half of rg's come from the distribution's glibc, and the
// worker's from the Go runtime (and, in tests, the race detector); both
// change what they call between releases (clone3 with a fallback only on
// ENOSYS, rseq, statx, map_shadow_stack), so an allow-list answering EPERM
// would break rg's threads on some future glibc without refusing anything
// an attacker needs. What reaches past the process's own memory and
// descriptors is short and stable: that is denied, with the rest of what
// the worker and rg were measured never to use in the same classes.

// denyAlways lists the system calls neither the worker, nor rg, nor the
// confined front-end ever makes. Names absent from an architecture (chmod
// on arm64) are skipped there; the *at twins cover them.
var denyAlways = []string{
	// Another process's memory, state or descriptors. Landlock already
	// refuses ptrace outside the domain; this also covers the ones inside.
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
	"kcmp", "pidfd_getfd",
	// Kernel interfaces a file server never needs, each a recurring source
	// of privilege escalation. io_uring would also reach sockets and files
	// without the system calls this filter inspects.
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"keyctl", "add_key", "request_key",
	"fanotify_init", "fanotify_mark",
	"name_to_handle_at", "open_by_handle_at",
	"memfd_create", "memfd_secret", "execveat",
	"modify_ldt", "uselib", "personality",
	// Namespaces, mounts and the root directory.
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
	"move_mount", "open_tree", "open_tree_attr", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr",
	// The whole system's state.
	"kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl",
	"quotactl_fd", "syslog", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "sethostname", "setdomainname", "iopl",
	"ioperm", "vhangup", "lookup_dcookie", "migrate_pages", "move_pages",
	// Identity. no_new_privs forbids gaining any; nothing here needs to
	// change it either.
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
	"setfsuid", "setfsgid", "setgroups", "capset",
	// Metadata by path. No Landlock ABI covers these, so they would
	// reach files outside the root. The descriptor-based twins
	// (fchmod, fchown, fsetxattr, fgetxattr, flistxattr, fremovexattr)
	// stay: preserving a file's mode, owner and extended attributes on an
	// atomic write needs them, on descriptors os.Root opened.
	"chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchownat",
	"utime", "utimes", "futimesat",
	"setxattr", "lsetxattr", "removexattr", "lremovexattr",
	"setxattrat", "removexattrat",
	"getxattr", "lgetxattr", "listxattr", "llistxattr",
	"getxattrat", "listxattrat",
	// Nodes neither process creates: devices, fifos, sockets, symlinks.
	"mknod", "mknodat", "symlink", "symlinkat",
}

// denyNetwork lists what creates or connects sockets. Both processes
// receive their sockets ready-made (the worker its end of the socketpair,
// the front-end its listener), so a new socket can only be an attack.
// Landlock covers TCP from ABI 4, pathname unix sockets from ABI 9 and UDP
// from ABI 10; MPTCP, raw and netlink sockets by none.
var denyNetwork = []string{"socket", "socketpair", "bind", "connect", "listen"}

// denyAccept is refused unless a listener is in use.
var denyAccept = []string{"accept", "accept4"}

// denyExec is refused in the front-end: its one child, the worker, is
// started before the filter.
var denyExec = []string{"execve"}

// enosys lists system calls refused with ENOSYS rather than EPERM: clone3
// and openat2 pass their flags in memory, where a filter cannot check
// them (for new namespaces, for an access mode of 3), and glibc, Go and
// the programs that try openat2 fall back to clone and openat, whose
// flags it can, only on ENOSYS.
var enosys = []string{"clone3", "openat2"}

// hot lists, most frequent first, the system calls the worker and the
// front-end make most (measured under the test suite). The filter checks
// them before anything else; it only orders, never changes, the verdict.
var hot = []string{
	"futex", "nanosleep", "epoll_pwait", "sched_yield", "read", "write",
	"newfstatat", "getdents64", "fcntl", "close", "openat", "mmap",
	"rt_sigreturn", "epoll_ctl", "fstat", "getpid", "tgkill", "gettid",
	"madvise", "tkill", "pread64", "pwrite64", "readlinkat", "statx",
	"rt_sigprocmask", "munmap", "mprotect", "sigaltstack", "recvmsg",
	"sendmsg", "recvfrom", "sendto", "clock_nanosleep", "lseek",
}
