// Package runners runs the worker's calls on the Calls stream on
// goroutines that stay for the next call: a new goroutine's stack grows,
// copied, through the interceptors and the handler on every call.
package runners

import "time"

// Runners run a stream's calls on goroutines that stay for the next
// call: a call goes to an idle one, or to a new one when none is idle.
// One idle for runnerIdle ends, so a burst leaves none behind; the rest
// end at Stop. There are never more goroutines than calls that ran at
// once (the worker runs at most link.MaxStreams).
type Runners struct {
	jobs chan func()
	quit chan struct{}
}

// runnerIdle is how long a runner waits for another call before it ends.
const runnerIdle = 10 * time.Second

// New returns runners with none started.
func New() *Runners {
	return &Runners{jobs: make(chan func()), quit: make(chan struct{})}
}

// Do runs f on an idle runner, or on a new one.
func (r *Runners) Do(f func()) {
	select {
	case r.jobs <- f:
	default:
		go r.runner(f)
	}
}

func (r *Runners) runner(f func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(runnerIdle)
		select {
		case f = <-r.jobs:
		case <-idle.C:
			return
		case <-r.quit:
			return
		}
	}
}

// Stop ends the idle runners; each busy one ends after its call.
func (r *Runners) Stop() { close(r.quit) }
