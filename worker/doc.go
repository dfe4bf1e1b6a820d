// Package worker is the confined half of fsmcp. It holds the only *os.Root
// in the system, serves the fsmcp.v1.WorkerService over its end of a
// socketpair, and runs rg as its child.
//
// Package worker runs confined; it trusts nothing it receives over the
// socket. Every path it is sent is resolved through its os.Root, one
// component at a time, so that "..", absolute paths and symlinks that leave
// the root are refused; Landlock refuses the same even if a bug bypasses the
// Root. The root, the rg binary and the limits come from argv, set by the
// trusted parent, never from an RPC.
package worker
