package filemeta

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// capabilityXattr holds a file's capabilities, which exec grants.
const capabilityXattr = "security.capability"

// contentChangeMode is the mode a file keeps when its content changes, as
// the kernel's write path leaves it for an unprivileged writer: setuid
// dropped, and setgid when the file is group-executable (without group
// execute, setgid marks mandatory locking and stays). fsmcp drops them
// whatever the worker's own privileges: the bytes are the agent's.
func contentChangeMode(mode uint32) uint32 {
	mode &^= unix.S_ISUID
	if mode&unix.S_IXGRP != 0 {
		mode &^= unix.S_ISGID
	}
	return mode
}

// Copy gives dst the owner, group, extended attributes (which
// include POSIX ACLs and security labels) and mode bits of src, all through
// the two descriptors, then reads them back from dst and compares. Anything
// that did not come out identical is an *UnsupportedError, naming what; a
// call that failed otherwise is an *os.SyscallError.
// dst holds new content, so it does not get what the kernel's write path
// would drop: setuid, setgid on a group-executable file
// (contentChangeMode), and the security.capability attribute.
//
// It does not see what the process cannot list: an unprivileged worker is
// not shown trusted.* attributes, so it cannot know to keep them.
func Copy(src, dst *os.File) error {
	sfd, dfd := int(src.Fd()), int(dst.Fd())
	var sst, dst0 unix.Stat_t
	if err := unix.Fstat(sfd, &sst); err != nil {
		return os.NewSyscallError("fstat", err)
	}
	mode := contentChangeMode(sst.Mode & 0o7777)
	if err := unix.Fstat(dfd, &dst0); err != nil {
		return os.NewSyscallError("fstat", err)
	}
	// Owner first: chown clears setuid/setgid and file capabilities; the
	// mode set last restores what the content change keeps.
	if sst.Uid != dst0.Uid || sst.Gid != dst0.Gid {
		uid, gid := -1, -1
		if sst.Uid != dst0.Uid {
			uid = int(sst.Uid)
		}
		if sst.Gid != dst0.Gid {
			gid = int(sst.Gid)
		}
		if err := unix.Fchown(dfd, uid, gid); err != nil {
			what := "the owner (uid " + itoa(sst.Uid) + ")"
			if uid == -1 {
				what = "the group (gid " + itoa(sst.Gid) + ")"
			}
			return unsupported(what, err)
		}
	}
	want, err := xattrs(sfd)
	if err != nil {
		return os.NewSyscallError("listxattr", err)
	}
	delete(want, capabilityXattr)
	for _, name := range sortedKeys(want) {
		if err := unix.Fsetxattr(dfd, name, want[name], 0); err != nil {
			return unsupported("extended attribute "+name, err)
		}
	}
	// A default ACL of the directory is inherited by the new file; the old
	// file may not have it.
	have, err := xattrs(dfd)
	if err != nil {
		return os.NewSyscallError("listxattr", err)
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			if err := unix.Fremovexattr(dfd, name); err != nil {
				return unsupported("the absence of extended attribute "+name, err)
			}
		}
	}
	// Mode last: setting an ACL rewrites the group bits, and fchmod (unlike
	// open's mode) is not filtered by the umask.
	if err := unix.Fchmod(dfd, mode); err != nil {
		return unsupported("mode "+ModeString(mode), err)
	}
	// Read back: the kernel may have dropped a bit silently (setgid for a
	// group the process is not in) or rewritten an attribute.
	var got unix.Stat_t
	if err := unix.Fstat(dfd, &got); err != nil {
		return os.NewSyscallError("fstat", err)
	}
	switch {
	case got.Mode&0o7777 != mode:
		return unsupported("mode "+ModeString(mode)+" (got "+ModeString(got.Mode)+")", nil)
	case got.Uid != sst.Uid:
		return unsupported("the owner (uid "+itoa(sst.Uid)+")", nil)
	case got.Gid != sst.Gid:
		return unsupported("the group (gid "+itoa(sst.Gid)+")", nil)
	}
	have, err = xattrs(dfd)
	if err != nil {
		return os.NewSyscallError("listxattr", err)
	}
	for _, name := range sortedKeys(want) {
		if v, ok := have[name]; !ok || !bytes.Equal(v, want[name]) {
			return unsupported("extended attribute "+name, nil)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			return unsupported("the absence of extended attribute "+name, nil)
		}
	}
	return nil
}

// UnsupportedError is a piece of metadata that could not be carried
// over: What names it, Err is the kernel's answer, if there was one.
type UnsupportedError struct {
	What string
	Err  error
}

func (e *UnsupportedError) Error() string {
	msg := "cannot preserve " + e.What
	var errno unix.Errno
	if errors.As(e.Err, &errno) {
		msg += ": " + errno.Error()
	}
	return msg
}

func unsupported(what string, err error) error {
	return &UnsupportedError{What: what, Err: err}
}

// xattrs returns every extended attribute of fd the process can list. A
// filesystem without xattr support has none.
func xattrs(fd int) (map[string][]byte, error) {
	names, err := listXattr(fd)
	if errors.Is(err, unix.ENOTSUP) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := make(map[string][]byte, len(names))
	for _, n := range names {
		v, err := getXattr(fd, n)
		if errors.Is(err, unix.ENODATA) {
			continue // removed since it was listed
		}
		if err != nil {
			return nil, err
		}
		m[n] = v
	}
	return m, nil
}

func listXattr(fd int) ([]string, error) {
	for {
		n, err := unix.Flistxattr(fd, nil)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
		buf := make([]byte, n)
		n, err = unix.Flistxattr(fd, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew since the size was asked
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if s != "" {
				names = append(names, s)
			}
		}
		return names, nil
	}
}

func getXattr(fd int, name string) ([]byte, error) {
	for {
		n, err := unix.Fgetxattr(fd, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, n)
		if n == 0 {
			return buf, nil
		}
		n, err = unix.Fgetxattr(fd, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ModeString is the permission bits of m in octal, as chmod takes them.
func ModeString(m uint32) string { return fmt.Sprintf("%04o", m&0o7777) }

// itoa is v in decimal.
func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// keptFlags are the inode flags (chattr's letters) a write carries over:
// the ones a user sets to say how the file is to be kept (s u c S d A m j
// t C x). Immutable and append-only are not among them: a file with either
// cannot be replaced at all, and the rename says so.
const keptFlags = 0x00000001 | // FS_SECRM_FL
	0x00000002 | // FS_UNRM_FL
	0x00000004 | // FS_COMPR_FL
	0x00000008 | // FS_SYNC_FL
	0x00000040 | // FS_NODUMP_FL
	0x00000080 | // FS_NOATIME_FL
	0x00000400 | // FS_NOCOMP_FL
	0x00004000 | // FS_JOURNAL_DATA_FL
	0x00008000 | // FS_NOTAIL_FL
	0x00800000 | // FS_NOCOW_FL
	0x02000000 // FS_DAX_FL

// CopyFlags gives dst the kept inode flags of src. It runs while dst is
// still empty, as some flags (No_COW) only take on an empty file. A
// filesystem without inode flags has none to keep.
func CopyFlags(src, dst *os.File) error {
	sflags, err := unix.IoctlGetUint32(int(src.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return nil
	}
	want := sflags & keptFlags
	dflags, err := unix.IoctlGetUint32(int(dst.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		if want == 0 {
			return nil
		}
		return unsupported(fmt.Sprintf("inode flags %#x", want), err)
	}
	if dflags&keptFlags == want {
		return nil
	}
	if err := unix.IoctlSetPointerInt(int(dst.Fd()), unix.FS_IOC_SETFLAGS, int(dflags&^keptFlags|want)); err != nil {
		return unsupported(fmt.Sprintf("inode flags %#x", want), err)
	}
	got, err := unix.IoctlGetUint32(int(dst.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || got&keptFlags != want {
		return unsupported(fmt.Sprintf("inode flags %#x", want), err)
	}
	return nil
}
