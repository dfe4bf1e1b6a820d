// Package workertest is the worker's conformance suite: one table of escape
// attempts, run against every RPC of any fsmcp.v1 worker. The worker
// package runs it against a worker served in-process (os.Root alone, no
// Landlock); cmd/fsmcp runs it against the real re-exec'd, Landlocked and
// seccomp-filtered worker. Both must pass: each layer holds on its own.
//
// Its code is in _linux.go files, as fsmcp's is: off Linux, building
// ./... stops at the one error the sandbox package gives.
package workertest
