//go:build race

package worker

// memoryShare divides the memory available to fsmcp for the worker's
// default budget. A race-detector build (the tests) keeps shadow memory
// of about twice its heap, which the Go runtime's accounting does not
// see, so it budgets a third of what a normal build does.
const memoryShare = 6
