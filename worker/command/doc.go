// Package command is the command runner: the process that runs fs_exec and
// fs_vcs_* commands. It runs confined, in its own user, mount, network and
// IPC namespaces, beside the file worker and never inside it, and it trusts
// nothing it receives over its socket: a request names a program, and only
// the programs the operator granted on the runner's command line can run.
//
// Each command runs as PID 1 of a new PID namespace, confined further than
// the runner (see sandbox.Command). What a command can read is what the
// operator granted: a granted shell reads every file beneath the root,
// whatever --deny says, and a granted interpreter runs any script it can
// read. The runner does not look at what a command does.
package command
