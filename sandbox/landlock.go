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
