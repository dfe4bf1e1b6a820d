// Package rgproc runs one rg process for a search: no environment, its own
// process group, SIGKILL should the worker die first, its stdout read to
// its end while progress is reported, and the whole group killed when the
// search ends early. It starts, signals and reaps the child from one
// locked OS thread. What rg is given (its arguments, its directory, its
// stdin) is the caller's, and so is the meaning of its exit status.
package rgproc
