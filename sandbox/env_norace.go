//go:build !race

package sandbox

// workerEnv is the worker's whole environment: nothing. Configuration
// travels in argv, secrets never reach the worker.
var workerEnv = []string{}
