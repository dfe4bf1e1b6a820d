package admit

import (
	"fmt"
	"runtime"
	"time"
)

// Limits are the worker's per-process budgets. They come from the trusted
// command line, never from an RPC. A zero field takes its default.
//
// They do not bound what gRPC itself allocates before a handler runs: a
// request message (at most one gRPC message) is decoded whole before the
// worker can look at it. The front-end bounds the calls it has in flight.
type Limits struct {
	// MaxFileBytes is the largest file an edit may read into memory or
	// produce: fs_replace (and every edit tool) refuses, with too_large and
	// before allocating, a result larger than this. At most half of
	// MemoryBytes, so that the old and the new content fit together.
	MaxFileBytes int64
	// MemoryBytes is the worker's soft memory limit (runtime/debug) and
	// the capacity of its memory budget: calls reserve what they are about
	// to hold, and one that would exceed it waits (QueueTimeout at most),
	// then fails with unavailable.
	MemoryBytes int64
	// MaxRG bounds the rg processes running at once.
	MaxRG int
	// MaxHeavy bounds the calls doing work proportional to a file or a tree
	// (writes, edits, recursive deletes, mkdir, hashing) at once.
	MaxHeavy int
	// QueueTimeout bounds how long a call waits for a slot or for memory
	// before it is answered unavailable (or timeout, if its own deadline
	// comes first).
	QueueTimeout time.Duration
}

// Default limits, sized for a small machine (the reference has 2 cores).
const (
	DefaultMemoryBytes  = 1 << 30
	DefaultQueueTimeout = 10 * time.Second
	// MemoryReserve is what the worker needs besides its budgeted work:
	// runtime, gRPC buffers, stacks, caches.
	MemoryReserve = 32 << 20
)

// MinMemoryBytes is the smallest memory budget a worker runs with.
const MinMemoryBytes = 64 << 20

// defaultMaxRG is the default bound of rg processes: two per core, at
// least two. Each rg runs up to one search thread per core.
func defaultMaxRG() int { return max(2, 2*runtime.NumCPU()) }

// defaultMaxHeavy is the default bound of heavy calls: four per core.
func defaultMaxHeavy() int { return max(4, 4*runtime.NumCPU()) }

// maxFileBytesFor is the largest --max-file-bytes a worker with the given
// memory budget can honour: half of what is left after its reserve, and
// never more than one gRPC message (maxMessage).
func maxFileBytesFor(memoryBytes, maxMessage int64) int64 {
	return min(max((memoryBytes-MemoryReserve)/2, 0), maxMessage)
}

// defaultMaxFileBytes is --max-file-bytes when not given: a quarter of the
// memory budget (two edits of the largest file fit at once), at most one
// gRPC message (maxMessage).
func defaultMaxFileBytes(memoryBytes, maxMessage int64) int64 {
	return min(max((memoryBytes-MemoryReserve)/4, 0), maxMessage)
}

// Check validates l and fills in defaults; maxMessage is the largest gRPC
// message.
func (l *Limits) Check(maxMessage int64) error {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.MemoryBytes < MinMemoryBytes {
		return fmt.Errorf("worker memory %d is below the minimum %d", l.MemoryBytes, MinMemoryBytes)
	}
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = defaultMaxFileBytes(l.MemoryBytes, maxMessage)
	}
	if m := maxFileBytesFor(l.MemoryBytes, maxMessage); l.MaxFileBytes < 1 || l.MaxFileBytes > m {
		return fmt.Errorf("max file bytes %d: want 1 to %d (half of worker memory %d less %d, at most %d)",
			l.MaxFileBytes, m, l.MemoryBytes, MemoryReserve, maxMessage)
	}
	if l.MaxRG == 0 {
		l.MaxRG = defaultMaxRG()
	}
	if l.MaxHeavy == 0 {
		l.MaxHeavy = defaultMaxHeavy()
	}
	if l.MaxRG < 1 || l.MaxHeavy < 1 {
		return fmt.Errorf("max rg %d and max heavy %d must be positive", l.MaxRG, l.MaxHeavy)
	}
	if l.QueueTimeout == 0 {
		l.QueueTimeout = DefaultQueueTimeout
	}
	if l.QueueTimeout < 0 {
		return fmt.Errorf("queue timeout %v must be positive", l.QueueTimeout)
	}
	return nil
}
