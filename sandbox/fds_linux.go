package sandbox

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CloseInherited closes every descriptor numbered from or above that is not
// in keep, and returns how many it closed. Both processes call it at start,
// before they open anything of their own and before they confine
// themselves: Landlock governs opening, not descriptors already open, so a
// read-write descriptor on an outside file, left open by whatever started
// fsmcp, would otherwise stay usable in the front-end, the worker and rg.
//
// It does not close the Go runtime's own descriptors (its poller's epoll
// and eventfd, the cgroup CPU limit files it reads), which exist before
// main and may have any number: they give access to nothing else. That is why it closes descriptor by
// descriptor, as /proc/self/fd lists them, rather than with one
// close_range over everything above the last one kept.
func CloseInherited(from int, keep ...int) (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, fmt.Errorf("list inherited descriptors: %w", err)
	}
	closed := 0
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < from || kept(fd, keep) {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own descriptor, closed by ReadDir
		}
		if runtimeOwn(fd, target) {
			continue
		}
		if unix.Close(fd) == nil {
			closed++
		}
	}
	return closed, nil
}

// runtimeOwn reports whether fd, which names target, is one the Go runtime
// opened for itself before main: its poller's epoll and eventfd, and the
// cgroup CPU limit files it keeps open, read-only, to follow the limit
// (GOMAXPROCS). Closing those would break the runtime, or worse, let it
// read whatever reused the number.
func runtimeOwn(fd int, target string) bool {
	if strings.HasPrefix(target, "anon_inode:[eventpoll]") || strings.HasPrefix(target, "anon_inode:[eventfd]") {
		return true
	}
	if !strings.HasPrefix(target, "/sys/fs/cgroup/") {
		return false
	}
	switch path.Base(target) {
	case "cpu.max", "cpu.cfs_quota_us", "cpu.cfs_period_us":
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		return err == nil && fl&unix.O_ACCMODE == unix.O_RDONLY
	}
	return false
}

func kept(fd int, keep []int) bool {
	for _, k := range keep {
		if fd == k {
			return true
		}
	}
	return false
}
