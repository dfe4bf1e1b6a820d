//go:build race

package sandbox

// workerEnv is the worker's whole environment. A race-detector build (a
// test build, never a release) also tells the worker's race runtime not to
// sleep a second at exit, which every test's shutdown would otherwise wait
// for.
var workerEnv = []string{"GORACE=atexit_sleep_ms=0"}
