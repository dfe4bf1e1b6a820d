package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// PidsCgroup is the pids cgroup that bounds the tasks (processes and
// threads) of every command together. RLIMIT_NPROC counts a user's
// processes and the kernel exempts root from it; a pids cgroup's pids.max
// binds whoever runs in it, root included. The front-end creates it
// before it confines itself and opens its cgroup.procs; each command's
// shim moves itself in through that descriptor before it executes the
// program, so nothing a command starts is outside it. The file names
// used (pids.max, pids.current, pids.events, cgroup.procs) are the same in
// cgroup v1 and v2; only where the cgroup is created differs.
type PidsCgroup struct {
	// Dir is the cgroup's directory on the host.
	Dir string
	// Version is "cgroup v2" or "cgroup v1".
	Version string
	// Max is its pids.max.
	Max int64
	// Procs is its cgroup.procs, open for writing.
	Procs *os.File
	// reaper is the write end of the reaper's pipe: while it is open,
	// the cgroup stays.
	reaper *os.File
}

// pidsCgroupPrefix names the cgroups fsmcp creates: the prefix and the
// front-end's process id.
const pidsCgroupPrefix = "fsmcp-exec."

// ErrNoPidsCgroup says that no pids controller is writable here; the
// error wrapping it says why.
var ErrNoPidsCgroup = errors.New("no writable pids cgroup")

// NewPidsCgroup creates a pids cgroup with pids.max = max beside this
// process's own: in cgroup v2 when this process's v2 cgroup delegates the
// pids controller to its children (cgroup.subtree_control lists it), else
// in the cgroup v1 pids hierarchy. The error wraps ErrNoPidsCgroup when
// neither is available. Cgroups of earlier front-ends that died without
// removing theirs (kill -9 of the front-end and of its reaper) are
// removed on the way, when empty.
func NewPidsCgroup(max int64) (*PidsCgroup, error) {
	if max < 1 {
		return nil, fmt.Errorf("pids.max %d: must be positive", max)
	}
	var reasons []string
	for _, version := range []string{"cgroup v2", "cgroup v1"} {
		parent, err := pidsParent(version)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", version, err))
			continue
		}
		c, err := createPidsCgroup(parent, version, max)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", version, err))
			continue
		}
		return c, nil
	}
	return nil, fmt.Errorf("%w (%s)", ErrNoPidsCgroup, strings.Join(reasons, "; "))
}

// pidsParent finds the directory, on the host, of this process's own
// cgroup in the hierarchy that holds the pids controller for version.
func pidsParent(version string) (string, error) {
	own, err := ownCgroup(version)
	if err != nil {
		return "", err
	}
	mnt, root, err := cgroupMount(version)
	if err != nil {
		return "", err
	}
	rel, ok := strings.CutPrefix(own, root)
	if !ok {
		return "", fmt.Errorf("own cgroup %s lies outside the mounted part %s", own, root)
	}
	dir := filepath.Join(mnt, rel)
	if version == "cgroup v2" {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil {
			return "", err
		}
		if !slices.Contains(strings.Fields(string(b)), "pids") {
			return "", fmt.Errorf("%s does not delegate the pids controller", dir)
		}
	}
	return dir, nil
}

// ownCgroup reads this process's cgroup path for version from
// /proc/self/cgroup: "0::PATH" in v2, "N:...,pids,...:PATH" in v1.
func ownCgroup(version string) (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if version == "cgroup v2" && f[0] == "0" && f[1] == "" {
			return f[2], nil
		}
		if version == "cgroup v1" && slices.Contains(strings.Split(f[1], ","), "pids") {
			return f[2], nil
		}
	}
	return "", errors.New("this process is in no such hierarchy")
}

// cgroupMount finds where the hierarchy for version is mounted, and the
// part of it the mount shows, from /proc/self/mountinfo.
func cgroupMount(version string) (mnt, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 3 {
			continue
		}
		switch {
		case version == "cgroup v2" && b[0] == "cgroup2",
			version == "cgroup v1" && b[0] == "cgroup" && slices.Contains(strings.Split(b[2], ","), "pids"):
			return unescapeMountinfo(a[4]), unescapeMountinfo(a[3]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", errors.New("not mounted")
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func createPidsCgroup(parent, version string, max int64) (*PidsCgroup, error) {
	removeStalePidsCgroups(parent)
	dir := filepath.Join(parent, pidsCgroupPrefix+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	c := &PidsCgroup{Dir: dir, Version: version, Max: max}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(max, 10)), 0); err != nil {
		_ = unix.Rmdir(dir)
		return nil, err
	}
	procs, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil, err
	}
	c.Procs = procs
	return c, nil
}

// removeStalePidsCgroups removes the empty cgroups under parent that a
// front-end no longer alive created. rmdir refuses a cgroup that still
// holds a task, so a live command's cgroup is never removed.
func removeStalePidsCgroups(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, ok := strings.CutPrefix(e.Name(), pidsCgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(pid); err != nil || n <= 0 || unix.Kill(n, 0) != unix.ESRCH {
			continue
		}
		_ = unix.Rmdir(filepath.Join(parent, e.Name()))
	}
}

// CloseProcs closes the front-end's descriptor of cgroup.procs, once the
// runner holds its own.
func (c *PidsCgroup) CloseProcs() {
	if c.Procs != nil {
		c.Procs.Close()
		c.Procs = nil
	}
}

// ReaperSubcommand makes the fsmcp binary the cgroup reaper: the process
// that removes the commands' pids cgroup once the front-end is gone.
const ReaperSubcommand = "__pids-reaper"

// reaperWait bounds how long the reaper waits for the cgroup's last
// tasks to be gone: the runner's commands die with it (Pdeathsig), which
// takes the kernel a moment.
const reaperWait = 10 * time.Second

// StartReaper starts exe as the reaper of c. The front-end, confined,
// may not remove a directory; the reaper is started before that, holds
// the read end of a pipe whose write end only the front-end has, and on
// its end of file (Release, or the front-end's exit however it ended)
// removes the cgroup as soon as it is empty, and exits. It is confined to
// removing directories in the cgroup's parent.
func (c *PidsCgroup) StartReaper(exe string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	// No standard streams: it must not keep the front-end's stderr open
	// after the front-end is gone. Its own session: a terminal's ^C to
	// the front-end's group leaves it to clean up.
	cmd := &exec.Cmd{Path: exe, Args: []string{exe, ReaperSubcommand, c.Dir}, Env: []string{},
		ExtraFiles: []*os.File{r}, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the cgroup reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	c.reaper = w
	return nil
}

// Release tells the reaper to remove the cgroup once its last task is
// gone. The front-end calls it when the runner has exited; its own exit
// does the same.
func (c *PidsCgroup) Release() {
	if c.reaper != nil {
		c.reaper.Close()
		c.reaper = nil
	}
}

// ReaperMain is the reaper: it waits for end of file on descriptor 3,
// then removes the cgroup directory its argument names. It returns the
// exit code.
func ReaperMain(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) || !strings.HasPrefix(filepath.Base(args[0]), pidsCgroupPrefix) {
		fmt.Fprintln(os.Stderr, "fsmcp: usage: __pids-reaper /path/to/"+pidsCgroupPrefix+"PID")
		return 2
	}
	dir := filepath.Clean(args[0])
	parent, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return 1
	}
	rules := []landlock.Rule{landlock.PathAccess(ll.AccessFSRemoveDir, filepath.Dir(dir))}
	if _, err := restrict(rules, nil, false); err != nil && !errors.Is(err, ErrNoLandlock) {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.NewFile(3, "front-end"))
	deadline := time.Now().Add(reaperWait)
	for {
		err := unix.Unlinkat(int(parent.Fd()), filepath.Base(dir), unix.AT_REMOVEDIR)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return 0
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
}
