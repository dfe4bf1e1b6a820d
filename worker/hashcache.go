package worker

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// hashKey identifies one version of a file's content as well as stat can:
// any write changes ctime, so a rewrite that keeps size and mtime (touch -r)
// still changes the key.
type hashKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

func keyOf(st *unix.Stat_t) hashKey {
	return hashKey{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// hashCache remembers the sha256 of recently hashed files, so a repeated
// fs_stat of an unchanged large file does not read it again. It holds at
// most hashCacheSize entries and forgets the oldest first.
type hashCache struct {
	mu    sync.Mutex
	sums  map[hashKey]string
	order []hashKey
	next  int
	// settle: a file whose ctime is younger than this is not cached, so a
	// write landing in the same timestamp tick as the hash can never be
	// mistaken for the hashed version.
	settle time.Duration
	// hashed counts the bytes read for hashing.
	hashed atomic.Int64
}

// hashCacheSize holds a source tree the size of Go's own (about 12,000
// files) whole, so that fs_digest of an unchanged tree reads no content;
// an entry costs about 150 bytes.
const hashCacheSize = 1 << 15

func newHashCache() *hashCache {
	return &hashCache{sums: make(map[hashKey]string), order: make([]hashKey, 0, 1024), settle: time.Second}
}

func (c *hashCache) get(k hashKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sums[k]
	return s, ok
}

// put caches sum for before, the stat taken when hashing started, only if
// after (taken when it ended) shows the same version and it has settled.
func (c *hashCache) put(before, after *unix.Stat_t, sum string) {
	k := keyOf(before)
	if keyOf(after) != k || time.Since(time.Unix(0, k.ctime)) < c.settle {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sums[k]; ok {
		return
	}
	if len(c.order) < hashCacheSize {
		c.order = append(c.order, k)
	} else {
		delete(c.sums, c.order[c.next])
		c.order[c.next] = k
		c.next = (c.next + 1) % hashCacheSize
	}
	c.sums[k] = sum
}
