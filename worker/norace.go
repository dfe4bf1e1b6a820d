//go:build !race

package worker

// memoryShare divides the memory available to fsmcp for the worker's
// default budget: half, the rest being the front-end's, rg's and the page
// cache's.
const memoryShare = 2
