package sandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// newestABI is the newest Landlock ABI go-landlock knows; BestEffort
// downgrades it to what the kernel offers.
var newestABI = landlock.V11

// KernelABI returns the Landlock ABI the running kernel offers, 0 if none.
func KernelABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Rights on the root. Neither grants execute, device ioctls, connecting to
// sockets, or creating devices, fifos or sockets: the worker never needs
// those, so a bug cannot use them either. Landlock counts renaming a name
// as making one of its type, so fs_move of a symlink needs MakeSym; the
// worker never creates a symlink otherwise.
const (
	rootReadRights  = ll.AccessFSReadFile | ll.AccessFSReadDir
	rootWriteRights = rootReadRights | ll.AccessFSWriteFile | ll.AccessFSTruncate |
		ll.AccessFSRemoveFile | ll.AccessFSRemoveDir | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSym | ll.AccessFSRefer
)

// ConfineWorker restricts every thread of the calling process, and every
// process it starts afterwards, to root (read and write, or read only) and
// to read and execute on execFiles (rg and its libraries). TCP bind and
// connect are refused, and abstract unix sockets and signals cannot reach
// outside the new domain. It also sets no_new_privs. rootPath should be a
// /proc/self/fd path of the already-opened root, so that the rule binds the
// same inode the worker's os.Root holds.
//
// Each grant adds a directory beyond the root (see Grant).
//
// It does not prevent what the kernel's ABI leaves uncovered (see the
// package comment).
func ConfineWorker(rootPath string, readOnly bool, execFiles []string, grants ...Grant) (Status, error) {
	rights := landlock.AccessFSSet(rootWriteRights)
	if readOnly {
		rights = rootReadRights
	}
	rules := []landlock.Rule{landlock.PathAccess(rights, rootPath)}
	desc := []string{fmt.Sprintf("root %s", rights)}
	for _, g := range grants {
		r := landlock.AccessFSSet(ll.AccessFSReadFile)
		if g.LikeRoot {
			r = rights
		}
		rules = append(rules, landlock.PathAccess(r, g.Path))
		desc = append(desc, fmt.Sprintf("%s %s", g.What, r))
	}
	if len(execFiles) > 0 {
		rules = append(rules, landlock.ROFiles(execFiles...))
		desc = append(desc, fmt.Sprintf("%d files read+execute (rg and its libraries)", len(execFiles)))
	}
	return restrict(rules, desc, readOnly)
}

// ConfineFrontend restricts every thread of the calling process to no
// filesystem access at all, no TCP bind or connect, and scoped IPC. A
// listening socket opened before the call keeps accepting.
func ConfineFrontend() (Status, error) {
	return restrict(nil, []string{"no filesystem access"}, true)
}

func restrict(rules []landlock.Rule, desc []string, readOnly bool) (Status, error) {
	kernel := KernelABI()
	st := Status{KernelABI: kernel, Rules: desc}
	if kernel == 0 {
		return st, ErrNoLandlock
	}
	if err := newestABI.BestEffort().Restrict(rules...); err != nil {
		return st, fmt.Errorf("landlock: %w", err)
	}
	st.ABI = min(kernel, 11)
	st.ReadOnly = readOnly
	st.NetworkDenied = st.ABI >= 4
	st.ScopedIPC = st.ABI >= 6
	return st, nil
}
