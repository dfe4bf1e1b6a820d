// Package fronttest holds what the front-end's in-process tests and the
// end-to-end tests of cmd/fsmcp share: the trees they serve, the reading
// of a tool's reply, and the checks of what a call left on disk. It is
// imported by tests only.
//
// Its code is in _linux.go files, as fsmcp's is: off Linux, building
// ./... stops at the one error the sandbox package gives.
package fronttest
