package hashcache

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// Key identifies one version of a file's content as well as stat can:
// any write changes ctime, so a rewrite that keeps size and mtime (touch -r)
// still changes the key.
type Key struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// KeyOf is the key of the version st describes.
func KeyOf(st *unix.Stat_t) Key {
	return Key{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// Sum is the sha256 of one version of a file and, for a file of at
// least stateMinBytes, the SHA-256 digest's state after its last byte
// (crypto/sha256's digest is an encoding.BinaryMarshaler). From the state,
// an append hashes only the bytes it adds.
type Sum struct {
	Hex   string
	State []byte
}

// stateMinBytes: below it, hashing the whole file again costs less than a
// millisecond, and the state (108 bytes) is not kept. Above it, the cache
// holds at most hashCacheSize states, 3.5 MiB.
const stateMinBytes = 1 << 20

// SumOf finishes h, which has hashed size bytes, into a Sum.
func SumOf(h hash.Hash, size int64) Sum {
	fs := Sum{Hex: hex.EncodeToString(h.Sum(nil))}
	if size >= stateMinBytes {
		// crypto/sha256's digest never fails to marshal.
		fs.State, _ = h.(encoding.BinaryMarshaler).MarshalBinary()
	}
	return fs
}

// ResumeSHA256 is a sha256 hash that has already hashed the bytes state
// (see Sum) describes; nil when there is no state.
func ResumeSHA256(state []byte) hash.Hash {
	if state == nil {
		return nil
	}
	h := sha256.New()
	if h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state) != nil {
		return nil
	}
	return h
}

// Cache remembers the sha256 (and state, see Sum) of recently
// hashed files, so a repeated fs_stat of an unchanged large file does not
// read it again, and a precondition on it is checked without reading it.
// It holds at most hashCacheSize entries and forgets the oldest first.
//
// An entry is only ever made under a key that proves the bytes: any write
// after the entry was made changes the key. put makes entries for files
// read (the settle rule), putPlaced for the file a commit has just put in
// place (the mtime rule).
type Cache struct {
	mu    sync.Mutex
	sums  map[Key]Sum
	order []Key
	next  int
	// Settle: a file whose ctime was younger than this when hashing began
	// is not cached, so a write landing in the same timestamp tick as the
	// hash can never be mistaken for the hashed version.
	Settle time.Duration
	// Hashed counts the bytes read for hashing.
	Hashed atomic.Int64
}

// hashCacheSize holds a source tree the size of Go's own (about 12,000
// files) whole, so that fs_digest of an unchanged tree reads no content;
// an entry costs about 150 bytes, and a state 108 more.
const hashCacheSize = 1 << 15

// New is an empty cache.
func New() *Cache {
	return &Cache{sums: make(map[Key]Sum), order: make([]Key, 0, 1024), Settle: time.Second}
}

// Get returns the sha256 cached for k.
func (c *Cache) Get(k Key) (string, bool) {
	fs, ok := c.Lookup(k)
	return fs.Hex, ok
}

// Lookup returns the Sum cached for k.
func (c *Cache) Lookup(k Key) (Sum, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs, ok := c.sums[k]
	return fs, ok
}

// Put caches fs for before, the stat taken when hashing started at start,
// only if after (taken when it ended) shows the same version and its ctime
// was at least settle old at start: a later write then falls in a later
// timestamp tick and changes the ctime.
func (c *Cache) Put(before, after *unix.Stat_t, start time.Time, fs Sum) {
	k := KeyOf(before)
	if KeyOf(after) != k || start.Sub(time.Unix(0, k.ctime)) < c.Settle {
		return
	}
	c.insert(k, fs)
}

// PutPlaced caches fs, the sum of the bytes a commit wrote, for the file
// it placed. staged is the new file's fstat after its last write and
// fsync, taken before it was renamed into place; placed is its fstat
// after. The entry is made only when
//
//   - placed is the same inode, size and mtime as staged: nothing wrote it
//     between the two (on kernels with multigrain timestamps, 6.13 and
//     later, the fstat of staged makes any later write change the mtime);
//   - placed's ctime, set by the rename, is later than its mtime: a write
//     through the file's name can only come after the rename, so it gets a
//     timestamp at least that ctime, and therefore changes the mtime.
//
// A write after the entry was made then changes the key. What neither
// rule sees is a write by another process into the temp name, in the
// timestamp tick of the worker's own last write, on a kernel without
// multigrain timestamps: the reply's sha256 rests on the same bytes.
func (c *Cache) PutPlaced(staged, placed *unix.Stat_t, fs Sum) {
	if staged.Dev != placed.Dev || staged.Ino != placed.Ino || staged.Size != placed.Size || staged.Mtim != placed.Mtim ||
		placed.Ctim.Nano() <= placed.Mtim.Nano() {
		return
	}
	c.insert(KeyOf(placed), fs)
}

// PutAppended records fs as the sum of now, a version the worker itself
// just appended to in place and fdatasynced, under the file's lock. As
// with PutPlaced, a write by another process in the same timestamp tick
// that kept the size would go unseen.
func (c *Cache) PutAppended(now *unix.Stat_t, fs Sum) { c.insert(KeyOf(now), fs) }

func (c *Cache) insert(k Key, fs Sum) {
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
	c.sums[k] = fs
}

// reportEvery is how often Stream reports its progress.
const reportEvery = 250 * time.Millisecond

// Stream hashes f from its current offset to its end, checking ctx every
// buffer (256 KiB), and, when report is set, reports the bytes hashed and
// the file's size every reportEvery.
func Stream(ctx context.Context, f *os.File, report func(hashed, total int64)) (Sum, error) {
	h := sha256.New()
	bp := fileio.Buffers.Get().(*[]byte)
	defer fileio.Buffers.Put(bp)
	buf := *bp
	var hashed, total int64
	if report != nil {
		if fi, err := f.Stat(); err == nil {
			total = fi.Size()
		}
	}
	next := time.Now().Add(reportEvery)
	for {
		if err := ctx.Err(); err != nil {
			return Sum{}, err
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		hashed += int64(n)
		if report != nil && time.Now().After(next) {
			report(hashed, total)
			next = time.Now().Add(reportEvery)
		}
		if err == io.EOF {
			return SumOf(h, hashed), nil
		}
		if err != nil {
			return Sum{}, err
		}
	}
}
