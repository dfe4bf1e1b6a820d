//go:build !linux

package sandbox

// fsmcp runs on Linux only: its containment is Landlock, seccomp and
// openat2-based os.Root semantics, which other kernels do not offer, and
// building it elsewhere would otherwise stop at whichever Linux-only
// system call the compiler meets first. This one undefined name is the
// build's only error on other systems, since every other package of the
// module that is not portable imports this one.
var _ = fsmcp_builds_on_Linux_only_it_confines_itself_with_Landlock_and_seccomp
