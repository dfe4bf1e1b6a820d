package checkpoint

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// MaxKept bounds how many checkpoints are kept: a new one past it evicts
// the oldest, as the quarantine's bound does.
const MaxKept = 64

// Store is the worker's list of checkpoints in the state directory and
// its touch log.
type Store struct {
	stateFD int
	mu      sync.Mutex
	// infos is oldest first.
	infos []*Info
	touch *os.File
	// last is the newest created time given, so that ids are unique.
	last int64
}

// OpenStore reads the checkpoints in the state directory stateFD.
func OpenStore(stateFD int) (*Store, error) {
	infos, err := List(stateFD)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	touch, err := OpenTouch(stateFD)
	if err != nil {
		return nil, fmt.Errorf("touch log: %w", err)
	}
	c := &Store{stateFD: stateFD, infos: infos, touch: touch}
	if len(infos) > 0 {
		c.last = infos[len(infos)-1].Created
	} else if err := touch.Truncate(0); err != nil {
		// No checkpoint needs a record of before this start.
		return nil, fmt.Errorf("touch log: %w", err)
	}
	return c, nil
}

// Any reports whether a checkpoint exists: without one, nothing needs a
// touch record. A nil Store has none.
func (c *Store) Any() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.infos) > 0
}

// DropBefore forgets the checkpoints taken before the quarantine entry
// seq (evicted, it may have held a version they need), oldest first, and
// returns their ids.
func (c *Store) DropBefore(seq uint64) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []string
	for len(c.infos) > 0 && c.infos[0].Seq < seq {
		gone = append(gone, c.infos[0].ID)
		Remove(c.stateFD, c.infos[0].ID)
		c.infos = c.infos[1:]
	}
	if len(gone) > 0 && len(c.infos) == 0 {
		// No checkpoint is left to need a record.
		c.touch.Truncate(0)
	}
	return gone
}

// Save gives rec its id, label and time and writes it; past MaxKept, the
// oldest go, and it returns their ids.
func (c *Store) Save(rec *Record, label string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	created := max(time.Now().UnixNano(), c.last+1)
	rec.ID, rec.Label, rec.Created = ID(created), label, created
	if err := Write(c.stateFD, rec); err != nil {
		return nil, err
	}
	c.last = created
	info := rec.Info
	c.infos = append(c.infos, &info)
	var gone []string
	for len(c.infos) > MaxKept {
		gone = append(gone, c.infos[0].ID)
		Remove(c.stateFD, c.infos[0].ID)
		c.infos = c.infos[1:]
	}
	return gone, nil
}

// Newest lists the checkpoints, newest first.
func (c *Store) Newest() []*Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Info, 0, len(c.infos))
	for i := len(c.infos) - 1; i >= 0; i-- {
		out = append(out, c.infos[i])
	}
	return out
}

// Touch appends recs to the touch log. A failure is reported on stderr:
// a rewind then sees those changes as conflicts, never loses a byte.
func (c *Store) Touch(recs []Touch) {
	if len(recs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := AppendTouch(c.touch, recs); err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp worker: touch log: %v\n", err)
	}
}
