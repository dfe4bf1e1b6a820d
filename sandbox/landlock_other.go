//go:build !linux

package sandbox

// KernelABI returns 0: Landlock exists only on Linux.
func KernelABI() int { return 0 }

// ConfineWorker always fails with ErrNoLandlock off Linux.
func ConfineWorker(rootPath string, readOnly bool, execFiles []string, grants ...Grant) (Status, error) {
	return Status{}, ErrNoLandlock
}

// ConfineFrontend always fails with ErrNoLandlock off Linux.
func ConfineFrontend() (Status, error) { return Status{}, ErrNoLandlock }

// ConfineRulesReader always fails with ErrNoLandlock off Linux.
func ConfineRulesReader(dirPath string) (Status, Seccomp, error) {
	return Status{}, Seccomp{}, ErrNoLandlock
}
