// Package selftest holds the worker's self-test: once confined, before
// serving, the worker tries on itself what its confinement must refuse,
// and reports each kernel answer in confinement.selftest. A probe that the
// enforced layers should have refused but that succeeds ends start-up:
// fsmcp never serves unconfined by accident. Under --allow-no-landlock,
// what the missing layer would have refused is reported as allowed and
// does not end start-up.
//
// It does not prove the confinement complete: four probes sample three
// layers (Landlock's filesystem rules, the seccomp filter's socket and
// access-mode-3 rules, Landlock's execute right); the enforcing tests
// cover the rest.
package selftest
