// Package sandbox holds the process and confinement mechanics of fsmcp:
// starting the worker on a socketpair, finding what running rg needs, and
// confining a process with Landlock.
//
// It does not decide what the worker may touch: callers pass the root and
// the files rg needs. It does not by itself stop a confined process from
// using what the kernel's Landlock ABI leaves open (UDP, MPTCP, pathname
// unix sockets, metadata system calls below ABI 9/10); the seccomp filter
// closes those.
package sandbox
