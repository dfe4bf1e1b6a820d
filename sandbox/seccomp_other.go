//go:build !linux

package sandbox

// FilterWorker always fails with ErrNoSeccomp off Linux.
func FilterWorker() (Seccomp, error) { return Seccomp{Mode: "none"}, ErrNoSeccomp }

// FilterFrontend always fails with ErrNoSeccomp off Linux.
func FilterFrontend(listener bool) (Seccomp, error) { return Seccomp{Mode: "none"}, ErrNoSeccomp }
