package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The command runner starts in new user, mount, network and IPC
// namespaces, as root of its user namespace (mapped to the caller's uid
// and gid, so files it creates belong to the operator). Why each:
//   - user: the others need it without host privileges, and capabilities
//     in it mean nothing outside it;
//   - mount: the root and the scratch directory are remounted noexec
//     (unless --exec-native), which the kernel's ELF loader and mmap
//     honour: a copied binary beneath the root cannot run even through
//     the dynamic loader, which Landlock alone cannot refuse (it must
//     grant the loader execute);
//   - network: a namespace with no interface but a down loopback, a third
//     wall behind Landlock's TCP rule and the seccomp socket refusal;
//   - IPC: System V shared memory and queues of the host are out of reach.
func execProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Pdeathsig:                  syscall.SIGKILL,
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWIPC,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
}

// Where commands see the root and their scratch directories: a tmpfs the
// runner mounts over /tmp in its own mount namespace. No reply can leak the
// root's host location through a command's getcwd.
const (
	ExecRoot        = "/tmp/root"
	execScratchBase = "/tmp/home"
	// ExecCache is where commands see --exec-cache ($FSMCP_CACHE).
	ExecCache = "/tmp/cache"
	// execTmpfsBytes bounds what all scratch directories together hold.
	execTmpfsBytes = 256 << 20
)

// ExecLayout is the command runner's view after EnterExecNamespace.
type ExecLayout struct {
	// Self is the fsmcp binary as /proc/self/fd/N, opened before /tmp
	// was covered: the shim every command starts as.
	Self string
	// SelfFiles are Self's interpreter and libraries.
	SelfFiles []string
	// NoExec is true when the root and scratch are mounted noexec.
	NoExec bool
	// Native: commands may execute files in the scratch, the cache and
	// (when writable) the root (ExecMounts.Native).
	Native bool
	// Cache is ExecCache when --exec-cache is mounted, else "".
	Cache string
	// Pids is the commands' pids cgroup's cgroup.procs (nil without
	// one), opened by the front-end: each shim moves itself in.
	Pids *os.File
	// Policy is the operator's --protect and --deny, which each shim
	// applies to its command's rules beneath the root.
	Policy Policy
	// next numbers scratch directories; calls run concurrently.
	next atomic.Uint64
}

// ExecMounts says what the runner's mounts let commands do.
type ExecMounts struct {
	// Writable: commands may write the root.
	Writable bool
	// Native: the scratch tmpfs, the cache and, when Writable, the root
	// are mounted without noexec, and commands get Landlock's execute
	// right on them (--exec-native).
	Native bool
	// Cache is the host directory bound at ExecCache, writable; "" for
	// none.
	Cache string
}

// EnterExecNamespace prepares the runner's mount namespace: every mount
// private and read-only, a tmpfs (nosuid, nodev, noexec unless native)
// over /tmp, the root bound at ExecRoot, nosuid, nodev, noexec unless
// native and writable, read-only unless writable, and the cache, when
// there is one, bound writable at ExecCache, nosuid, nodev, noexec unless
// native. It must run in the runner, before it confines itself: Landlock
// forbids mounting.
//
// Read-only mounts refuse every metadata change (chmod, chown, xattrs,
// times, file flags) whatever descriptor asks, an access-mode-3 or a
// read-only one included: the scratch and, under --exec-writable, the
// root are the only writable mounts a command sees. Each command gets a
// user and mount namespace of its own beneath the runner's (see Start),
// where the kernel locks these flags: not even a process with every
// capability there can make a mount writable again.
func EnterExecNamespace(root string, m ExecMounts) (*ExecLayout, error) {
	writable := m.Writable
	self, err := filepath.EvalSymlinks("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	selfFiles, err := ExecDeps(self)
	if err != nil {
		return nil, fmt.Errorf("resolve own libraries: %w", err)
	}
	fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open own binary: %w", err)
	}
	// The shim is executed by this descriptor's /proc path in the child,
	// after the child's own descriptors (its working directory, fd 3) are
	// in place: keep it far above them.
	selfFD, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 100)
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("move own binary's descriptor: %w", err)
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open root: %w", err)
	}
	defer unix.Close(rootFD)
	cacheFD := -1
	if m.Cache != "" {
		// Opened before /tmp is covered, like the root: bound by its
		// descriptor, so a path swapped meanwhile is not what commands get.
		if cacheFD, err = unix.Open(m.Cache, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("open the cache: %w", err)
		}
		defer unix.Close(cacheFD)
	}
	// Without --exec-native the scratch tmpfs is noexec: nothing a
	// command writes there can run.
	tmpFlags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !m.Native {
		tmpFlags |= unix.MS_NOEXEC
	}
	type step struct {
		what string
		err  func() error
	}
	steps := []step{
		{"make mounts private", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"mount tmpfs on /tmp", func() error {
			return unix.Mount("tmpfs", "/tmp", "tmpfs", tmpFlags,
				fmt.Sprintf("size=%d,nr_inodes=65536,mode=0700", execTmpfsBytes))
		}},
		{"mkdir " + ExecRoot, func() error { return unix.Mkdir(ExecRoot, 0o700) }},
		{"mkdir " + execScratchBase, func() error { return unix.Mkdir(execScratchBase, 0o700) }},
		{"bind the root", func() error {
			return unix.Mount(fmt.Sprintf("/proc/self/fd/%d", rootFD), ExecRoot, "", unix.MS_BIND, "")
		}},
		{"remount the root", func() error { return remountBind(ExecRoot, !writable, !(m.Native && writable)) }},
	}
	if cacheFD >= 0 {
		steps = append(steps,
			step{"mkdir " + ExecCache, func() error { return unix.Mkdir(ExecCache, 0o700) }},
			step{"bind the cache", func() error {
				return unix.Mount(fmt.Sprintf("/proc/self/fd/%d", cacheFD), ExecCache, "", unix.MS_BIND, "")
			}},
			step{"remount the cache", func() error { return remountBind(ExecCache, false, !m.Native) }})
	}
	steps = append(steps,
		step{"make every mount read-only", func() error { return setReadOnly("/", true, unix.AT_RECURSIVE) }},
		step{"make the scratch tmpfs writable", func() error { return setReadOnly("/tmp", false, 0) }})
	if cacheFD >= 0 {
		steps = append(steps, step{"make the cache writable", func() error { return setReadOnly(ExecCache, false, 0) }})
	}
	if writable {
		steps = append(steps, step{"make the root writable", func() error { return setReadOnly(ExecRoot, false, 0) }})
	}
	for _, s := range steps {
		if err := s.err(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.what, err)
		}
	}
	selfPath := fmt.Sprintf("/proc/self/fd/%d", selfFD)
	l := &ExecLayout{Self: selfPath, SelfFiles: append([]string{selfPath}, selfFiles[1:]...), NoExec: !m.Native, Native: m.Native}
	if cacheFD >= 0 {
		l.Cache = ExecCache
	}
	return l, nil
}

// setReadOnly sets or clears the read-only flag of the mount at path (and,
// with AT_RECURSIVE in flags, of every mount beneath it).
func setReadOnly(path string, readOnly bool, flags int) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if !readOnly {
		attr = &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	}
	return unix.MountSetattr(unix.AT_FDCWD, path, uint(flags), attr)
}

// remountBind adds nosuid and nodev (and noexec, and read-only) to the
// bind mount at path. In a user namespace the flags the original mount
// has are locked and must be repeated, or the kernel refuses the remount
// (a host mount that is noexec stays so).
func remountBind(path string, readOnly, noExec bool) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if noExec {
		flags |= unix.MS_NOEXEC
	}
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	return unix.Mount("", path, "", flags, "")
}

// Rights of commands beneath the root and in their scratch directory.
// Neither grants execute, devices, fifos or sockets; --exec-native adds
// execute (nativeRights) to the scratch, the cache and a writable root.
const (
	commandReadRights  = rootReadRights
	commandWriteRights = rootWriteRights
	devNullRights      = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	nativeRights       = ll.AccessFSExecute
)

// writeRights are the rights on the scratch and the cache: the
// command's write rights, and execute when native.
func writeRights(native bool) landlock.AccessFSSet {
	if native {
		return commandWriteRights | nativeRights
	}
	return commandWriteRights
}

// ConfineRunner restricts the command runner to what its commands may
// touch (each command is confined further, to its own part): the root
// (read, and write when writable), the scratch tmpfs and the cache, read
// and execute on execFiles (its own binary, the programs, their helpers,
// rg, their libraries), read on readDirs, and /dev/null; execute too on
// the scratch, the cache and a writable root when native. TCP, abstract
// unix sockets and signals are refused as for the worker.
func (l *ExecLayout) ConfineRunner(writable bool, execFiles, readDirs []string) (Status, error) {
	rootRights := landlock.AccessFSSet(commandReadRights)
	if writable {
		rootRights = writeRights(l.Native)
	}
	rules := []landlock.Rule{
		landlock.PathAccess(rootRights, ExecRoot),
		landlock.PathAccess(writeRights(l.Native), execScratchBase),
		landlock.ROFiles(append(append([]string{}, l.SelfFiles...), execFiles...)...),
		landlock.PathAccess(devNullRights, os.DevNull),
	}
	if len(readDirs) > 0 {
		rules = append(rules, landlock.PathAccess(commandReadRights, readDirs...))
	}
	if l.Cache != "" {
		rules = append(rules, landlock.PathAccess(writeRights(l.Native), l.Cache))
	}
	desc := []string{fmt.Sprintf("root %s", rootRights), "scratch " + writeRights(l.Native).String(),
		fmt.Sprintf("%d files read+execute", len(l.SelfFiles)+len(execFiles)),
		fmt.Sprintf("%d directories read", len(readDirs))}
	return restrict(rules, desc, !writable)
}

// FilterRunner installs the command runner's seccomp filter: a command's
// refusals (filters stack, so the runner's must allow what its commands
// may do), except that clone may create the PID, user and mount
// namespaces each command gets (see Start).
func FilterRunner(writable, native bool) (Seccomp, error) {
	return installCond(commandDeny(writable, native), commandConditional(nsFlags&^commandNS, writable, native), true)
}

// filterCommand installs a command's own seccomp filter on the calling
// thread, the one that executes the command: the worker's refusals, no
// namespaces of any kind.
func filterCommand(writable, native bool) (Seccomp, error) {
	sc, err := installCond(commandDeny(writable, native), commandConditional(nsFlags, writable, native), false)
	if err != nil {
		return sc, err
	}
	// Last, so that its success prevails over the refusals (see
	// sameIDsProgram).
	return sc, filterSameIDs()
}

// commandReads are system calls the worker never makes but ordinary
// programs do: reading extended attributes by path (ls -l asks every file
// for its ACL). Like stat, which no Landlock ABI covers either, they
// reveal metadata of a named file, never its content; they stay allowed
// for commands.
var commandReads = []string{"getxattr", "lgetxattr", "listxattr", "llistxattr", "getxattrat", "listxattrat"}

// descriptorMeta are the system calls that change a file's mode, owner,
// extended attributes or times through a descriptor (utimensat with a
// NULL path is futimens; with a path it is refused always). No Landlock
// ABI governs them, and a descriptor opened for reading (a granted
// program, a file of the root) is enough. A command of a read-only root
// may change no metadata anywhere but its scratch, where nothing needs
// it: they are refused. Under --exec-writable the root's files need them
// (git, cp -p, tar), and the read-only mounts alone keep them from
// everything but the root and the scratch.
var descriptorMeta = []string{"fchmod", "fchown", "fsetxattr", "fremovexattr", "utimensat"}

// commandAllowed are system calls of the worker's list that commands may
// make with some arguments (commandConditional refuses the others):
// socketpair of the unix family, which node and other runtimes use for
// their children's standard streams (a connected pair reaches nothing but
// itself), and, under nativeChmod, chmod by path.
var commandAllowed = []string{"socketpair"}

// pathChmod are the chmod calls by path. A linker (ld) sets the mode of
// what it wrote by name, and no Landlock ABI governs it: allowed only
// when the scratch and the cache are the only writable mounts
// (nativeChmod), where the read-only mounts answer EROFS for every other
// file, and never with a set-user-ID or set-group-ID bit.
var pathChmod = []string{"chmod", "fchmodat", "fchmodat2"}

// nativeChmod says whether commands may chmod by path: with
// --exec-native and a read-only root. Under --exec-writable a path could
// name a protected or denied file of the root, which has no Landlock
// right this call would need.
func nativeChmod(writable, native bool) bool { return native && !writable }

// commandDeny is what a command's filter refuses: the worker's list but
// commandReads and commandAllowed (pathChmod too under nativeChmod), and
// descriptorMeta unless the root is writable.
func commandDeny(writable, native bool) []string {
	d := slices.DeleteFunc(workerDeny(), func(n string) bool {
		return slices.Contains(commandReads, n) || slices.Contains(commandAllowed, n) ||
			(nativeChmod(writable, native) && slices.Contains(pathChmod, n))
	})
	if !writable {
		d = append(d, descriptorMeta...)
	}
	return d
}

// restrictThread enforces rules on the calling thread only, the one that
// executes the command next. A Go program's other threads would need a
// signal to join (go-landlock's all-threads path), which PID 1 of a
// namespace may never receive; execve discards them anyway.
func restrictThread(rules []landlock.Rule) error {
	fd, flags, err := newestABI.BestEffort().EnableLoggingForSubprocesses().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		return ErrNoLandlock
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// CommandSeccompDenied is how many system calls a command's filter
// refuses on this CPU (0 when no filter can be built).
func CommandSeccompDenied(writable, native bool) int {
	info, err := arch.GetInfo("")
	if err != nil || info.SyscallNames == nil {
		return 0
	}
	_, refused := policiesCond(info, commandDeny(writable, native), commandConditional(nsFlags, writable, native))
	return len(refused)
}

// Limits are a command's resource limits (setrlimit), each both soft and
// hard, so the command cannot raise them.
type Limits struct {
	// Procs bounds the processes of one command (RLIMIT_NPROC), counted
	// in the command's own user namespace; the pids cgroup bounds all
	// commands together.
	Procs uint64
	// FileBytes bounds one file a command writes (RLIMIT_FSIZE).
	FileBytes uint64
	// CPUSeconds bounds each process's CPU time (RLIMIT_CPU).
	CPUSeconds uint64
	// MemoryBytes bounds each process's address space (RLIMIT_AS).
	MemoryBytes uint64
	// Files bounds each process's open descriptors (RLIMIT_NOFILE).
	Files uint64
}

// Strings lists the limits as name=value.
func (l Limits) Strings() []string {
	return []string{
		"nproc=" + strconv.FormatUint(l.Procs, 10),
		"fsize=" + strconv.FormatUint(l.FileBytes, 10),
		"cpu=" + strconv.FormatUint(l.CPUSeconds, 10),
		"as=" + strconv.FormatUint(l.MemoryBytes, 10),
		"nofile=" + strconv.FormatUint(l.Files, 10),
		"core=0",
	}
}

// Command is one program to run in its own confinement.
type Command struct {
	// Path is the program (absolute); Args its argv, Args[0] included.
	Path string
	Args []string
	// Env is the command's whole environment.
	Env []string
	// Dir is its working directory, opened beneath the root.
	Dir *os.File
	// Stdin, Stdout and Stderr are its standard streams.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Writable grants write beneath the root.
	Writable bool
	// Native grants execute on the scratch, the cache (with Cache) and,
	// with Writable, the root, where the layout's mounts allow it.
	Native bool
	// Cache grants the layout's cache.
	Cache bool
	// ExecFiles are granted read and execute; ReadDirs read.
	ExecFiles []string
	ReadDirs  []string
	// Scratch is its private directory (HOME and TMPDIR), beneath the
	// scratch tmpfs.
	Scratch string
	Limits  Limits
	// Probe makes the shim, once confined as the command would be, run
	// the self-test's probes on Path (see ProbeMetadata) and print their
	// answers instead of executing anything.
	Probe bool
	// Lines are the --rules lines of the tool the command runs for, as
	// the runner read them when the call started: the shim leaves what
	// they deny out of the command's rules, as it does --deny.
	Lines []RuleLine
	// Protected are root-relative paths the command may not change,
	// literally (Matcher.WithPaths), beside --protect: the repositories'
	// derived protection when the call started.
	Protected []string
}

// Process is a started command.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	kill chan struct{}
	err  error
}

// NewScratch creates a fresh private directory for one command.
func (l *ExecLayout) NewScratch() (string, error) {
	for {
		dir := filepath.Join(execScratchBase, strconv.FormatUint(l.next.Add(1), 10))
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return dir, err
	}
}

// commandNS are the namespaces each command starts in. The PID namespace
// ends everything the command started with it. The user and mount
// namespaces lock the runner's mounts: the kernel marks every mount it
// copies into a mount namespace owned by a less privileged user namespace
// MNT_LOCKED, its read-only, noexec, nosuid and nodev flags locked, so no
// remount can clear them. The user namespace has no uid or gid map: the
// command runs as the overflow uid (65534) with no capability over any
// file, while its files are still the operator's (the kernel's own ids
// do not change).
const commandNS = unix.CLONE_NEWPID | unix.CLONE_NEWUSER | unix.CLONE_NEWNS

// Start runs c as PID 1 of a new PID namespace, through the shim
// (CommandSubcommand), which limits, confines and then becomes it. When
// that process ends, the kernel kills every other process of the
// namespace: nothing a command starts outlives it, whether it left its
// process group, its session or double-forked.
func (l *ExecLayout) Start(c *Command) (*Process, error) {
	a := []string{"fsmcp", CommandSubcommand,
		"--writable=" + strconv.FormatBool(c.Writable),
		"--native=" + strconv.FormatBool(c.Native && l.Native),
		"--scratch=" + c.Scratch,
		"--nproc=" + strconv.FormatUint(c.Limits.Procs, 10),
		"--fsize=" + strconv.FormatUint(c.Limits.FileBytes, 10),
		"--cpu=" + strconv.FormatUint(c.Limits.CPUSeconds, 10),
		"--as=" + strconv.FormatUint(c.Limits.MemoryBytes, 10),
		"--nofile=" + strconv.FormatUint(c.Limits.Files, 10),
		"--probe=" + strconv.FormatBool(c.Probe),
	}
	if c.Cache && l.Cache != "" {
		a = append(a, "--cache="+l.Cache)
	}
	for _, f := range c.ExecFiles {
		a = append(a, "--exec-file="+f)
	}
	for _, d := range c.ReadDirs {
		a = append(a, "--read-dir="+d)
	}
	a = append(a, l.Policy.args()...)
	for _, line := range c.Lines {
		a = append(a, line.Arg())
	}
	for _, p := range c.Protected {
		a = append(a, "--protect-path="+p)
	}
	a = append(a, "--", c.Path)
	a = append(a, c.Args...)
	files := []*os.File{c.Dir}
	if l.Pids != nil {
		// Descriptor 4 in the shim.
		files = append(files, l.Pids)
		a = slices.Insert(a, 2, "--pids-fd=4")
	}
	cmd := &exec.Cmd{Path: l.Self, Args: a, Env: c.Env, Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr,
		ExtraFiles:  files,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Cloneflags: commandNS}}
	p := &Process{cmd: cmd, done: make(chan struct{}), kill: make(chan struct{}, 1)}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig follows the thread that forked the child: keep this
		// goroutine on it until the command is reaped. The kill is sent
		// from this thread too: on a kernel without Landlock's
		// TSYNC (ABI < 8), each thread of the runner was confined into a
		// domain of its own, and signal scoping lets a thread signal only
		// processes beneath its own domain.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited := make(chan struct{})
		go func() {
			p.err = cmd.Wait()
			close(waited)
		}()
		for {
			select {
			case <-p.kill:
				_ = cmd.Process.Kill()
			case <-waited:
				close(p.done)
				return
			}
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	return p, nil
}

// Kill ends the command and, with it, its whole PID namespace.
func (p *Process) Kill() {
	select {
	case p.kill <- struct{}{}:
	default:
	}
}

// Done is closed once the command has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the command and returns how it ended: its exit status or
// the signal that killed it. I/O errors of the streams are Wait's error.
func (p *Process) Wait() (syscall.WaitStatus, error) {
	<-p.done
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ws, nil
	}
	return ws, p.err
}

// chdirTo makes the directory open on fd the working directory, by its
// place in this mount namespace. The descriptor, opened by the runner,
// names the directory on the runner's mount, which this namespace only
// has a copy of: a working directory there would be unreachable (getcwd
// fails). The path is checked to lead to the same directory.
func chdirTo(fd int) error {
	path, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return err
	}
	var want, got unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return err
	}
	if err := unix.Chdir(path); err != nil {
		return err
	}
	if err := unix.Stat(".", &got); err != nil {
		return err
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		return fmt.Errorf("%s changed while the command started", path)
	}
	return nil
}

// The self-test's probes, run by the shim on a file outside the root that
// commands may read (a granted program), each named as the runner lists
// it. A probe that the kernel allows changes nothing: fchmod asks for the
// file's own mode.
const (
	ProbeOpenMode3  = "access-mode-3 open outside the root"
	ProbeFchmodMode = "fchmod through the access-mode-3 descriptor"
	ProbeFchmodRead = "fchmod through a read-only descriptor outside the root"
)

// probeMetadata runs the probes on path and returns "name\tanswer" lines,
// each answer an errno name or "allowed".
func probeMetadata(path string) string {
	var b strings.Builder
	line := func(name string, err error) { fmt.Fprintf(&b, "%s\t%s\n", name, errnoName(err)) }
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		line(ProbeOpenMode3, err)
		return b.String()
	}
	mode := st.Mode & 0o7777
	fd, err := unix.Open(path, 3|unix.O_CLOEXEC, 0)
	line(ProbeOpenMode3, err)
	if err == nil {
		line(ProbeFchmodMode, unix.Fchmod(fd, mode))
		unix.Close(fd)
	}
	fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		line(ProbeFchmodRead, fmt.Errorf("the read-only open failed: %s", errnoName(err)))
		return b.String()
	}
	line(ProbeFchmodRead, unix.Fchmod(fd, mode))
	unix.Close(fd)
	return b.String()
}

// errnoName is a system call's answer: "allowed", or its errno's name.
func errnoName(err error) string {
	var en syscall.Errno
	switch {
	case err == nil:
		return "allowed"
	case errors.As(err, &en) && unix.ErrnoName(en) != "":
		return unix.ErrnoName(en)
	}
	return err.Error()
}

// MetadataGuards names what keeps commands from changing metadata by
// descriptor, for the attestation: the read-only mounts always, and the
// seccomp filter's part when one is installed.
func MetadataGuards(writable, native, cache, seccomp bool) []string {
	writableMounts := "the scratch"
	if cache {
		writableMounts += ", the cache"
	}
	if writable {
		writableMounts += " and the root"
	}
	g := []string{"read-only mounts but " + writableMounts + ", locked in each command's own user and mount namespaces"}
	if seccomp {
		refused := "seccomp refuses access-mode-3 opens, openat2 (ENOSYS), fchmod to a set-user-ID or set-group-ID mode, file attribute ioctls"
		if !writable {
			refused += ", and fchmod, fchown, fsetxattr, fremovexattr and futimens"
		}
		if nativeChmod(writable, native) {
			refused += "; chmod by path allowed without set-id bits (the writable mounts are the scratch and the cache)"
		}
		g = append(g, refused)
	}
	return g
}

// ruleLines are the shim's --rule arguments, in their order.
type ruleLines []RuleLine

func (l *ruleLines) String() string { return fmt.Sprint(len(*l)) }
func (l *ruleLines) Set(v string) error {
	line, err := ParseRuleLine(v)
	*l = append(*l, line)
	return err
}

// CommandMain is the shim: it runs as PID 1 of the command's namespace,
// moves itself into the commands' pids cgroup (descriptor 4, when there
// is one), sets the limits, changes to the directory on descriptor 3, confines
// itself (Landlock, then seccomp) and executes the program. It returns only
// on failure, with the exit code 127 that shells use for "could not run".
func CommandMain(args []string) int {
	if err := commandMain(args); err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp: %v\n", err)
	}
	return 127
}

func commandMain(args []string) error {
	var (
		writable, native           bool
		scratch, cache             string
		execFiles, readDirs        listFlag
		policy                     Policy
		lines                      ruleLines
		protected                  listFlag
		nproc, fsize, cpu, as, nof uint64
		pidsFD                     int
		probe                      bool
	)
	fs := flag.NewFlagSet(CommandSubcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&writable, "writable", false, "")
	fs.BoolVar(&native, "native", false, "")
	fs.StringVar(&scratch, "scratch", "", "")
	fs.StringVar(&cache, "cache", "", "")
	fs.Var(&execFiles, "exec-file", "")
	fs.Var(&readDirs, "read-dir", "")
	fs.Uint64Var(&nproc, "nproc", 0, "")
	fs.Uint64Var(&fsize, "fsize", 0, "")
	fs.Uint64Var(&cpu, "cpu", 0, "")
	fs.Uint64Var(&as, "as", 0, "")
	fs.Uint64Var(&nof, "nofile", 0, "")
	fs.IntVar(&pidsFD, "pids-fd", -1, "")
	fs.BoolVar(&probe, "probe", false, "")
	fs.Var((*listFlag)(&policy.Protect), "protect", "")
	fs.Var((*listFlag)(&policy.Deny), "deny", "")
	fs.Var(&lines, "rule", "")
	fs.Var(&protected, "protect-path", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	compiled, err := policy.Compile()
	if err != nil {
		return err
	}
	compiled = compiled.WithLines(lines).WithPaths(protected)
	if pidsFD >= 0 {
		// "0" is the writer: this whole process, before the program
		// runs, so everything it starts is counted.
		_, err := unix.Write(pidsFD, []byte("0"))
		unix.Close(pidsFD)
		if err != nil {
			return fmt.Errorf("join the commands' pids cgroup: %w", err)
		}
	}
	argv := fs.Args()
	if len(argv) < 2 || scratch == "" || len(execFiles) == 0 {
		return errors.New("usage: __command [flags] -- PATH ARGV0 [ARG...]")
	}
	// Landlock and seccomp apply to this thread only, which then
	// executes the command: never unlocked. The shim has no capability
	// in its user namespace, so Landlock needs no_new_privs first.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS, 1): %w", err)
	}
	if err := chdirTo(3); err != nil {
		return fmt.Errorf("change to the working directory: %w", err)
	}
	unix.Close(3)
	// The rules beneath the root leave the policy's paths out, as the
	// tree is now: the walk happens here, in the command's own process,
	// before anything of the command runs.
	rules, err := rootRules(ExecRoot, writable, native, compiled)
	if err != nil {
		return fmt.Errorf("apply --deny, --protect, --rules and derived protection: %w", err)
	}
	rules = append(rules,
		landlock.PathAccess(writeRights(native), scratch),
		landlock.ROFiles(execFiles...),
		landlock.PathAccess(devNullRights, os.DevNull),
	)
	if len(readDirs) > 0 {
		rules = append(rules, landlock.PathAccess(commandReadRights, readDirs...))
	}
	if cache != "" {
		rules = append(rules, landlock.PathAccess(writeRights(native), cache))
	}
	if err := restrictThread(rules); err != nil && !errors.Is(err, ErrNoLandlock) {
		return err
	}
	if _, err := filterCommand(writable, native); err != nil && !errors.Is(err, ErrNoSeccomp) {
		return err
	}
	// The limits come last: the race detector's runtime (in test builds)
	// has already mapped more than the address-space limit allows.
	for _, r := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_NPROC, nproc}, {unix.RLIMIT_FSIZE, fsize}, {unix.RLIMIT_CPU, cpu},
		{unix.RLIMIT_AS, as}, {unix.RLIMIT_NOFILE, nof}, {unix.RLIMIT_CORE, 0},
	} {
		// syscall.Setrlimit, not unix's: for RLIMIT_NOFILE it also
		// drops the limit the Go runtime saved to restore at exec.
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: r.v, Max: r.v}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", r.res, err)
		}
	}
	if probe {
		os.Stdout.WriteString(probeMetadata(argv[0]))
		os.Exit(0)
	}
	err = syscall.Exec(argv[0], argv[1:], os.Environ())
	return fmt.Errorf("exec %s: %w", argv[0], err)
}
