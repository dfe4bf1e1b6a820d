package sandbox

import "errors"

// ErrNoLandlock is returned when the kernel offers no Landlock ABI.
var ErrNoLandlock = errors.New("the kernel does not support Landlock")

// Status is what a Landlock restriction actually enforced, read back from
// the kernel's ABI rather than assumed from a best-effort call's success.
type Status struct {
	// KernelABI is the Landlock ABI the kernel offers (0: none).
	KernelABI int
	// ABI is the ABI of the enforced ruleset (0: nothing enforced).
	ABI int
	// ReadOnly is true when the ruleset grants no write right anywhere.
	ReadOnly bool
	// NetworkDenied is true when TCP bind and connect are refused.
	NetworkDenied bool
	// ScopedIPC is true when abstract unix sockets and signals are scoped.
	ScopedIPC bool
	// Rules describes the granted rules, for the start-up log.
	Rules []string
}

// Grant is a directory beyond the root that the confined worker may reach.
// Path should be a /proc/self/fd path of a descriptor the worker opened
// before confining itself, so that the rule binds the inode it holds.
type Grant struct {
	Path string
	// What names the directory in the log line.
	What string
	// LikeRoot grants exactly the root's rights, as a quarantine needs:
	// Landlock lets a rename with refer move a file only where it gains
	// no right, so the same set both ways is what lets a write's displaced
	// file go into the quarantine and an undo bring it back. Otherwise
	// the grant is to read files only (the --rules file's directory).
	LikeRoot bool
}
