package worker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/dirwalk"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	qindex "github.com/fsmcp/fsmcp/worker/internal/quarantine"
	"golang.org/x/sys/unix"
)

// Quarantine keeps what deletes remove and what writes replace, in a
// directory outside the root on the same filesystem, so that Undo can put
// it back. Nothing is copied: the worker renames the inode it already holds
// (a write's displaced file, a deleted name) into the quarantine, and back.
//
// With a state directory (persist), the index of what each entry was and
// the key that seals tokens live there, so entries and tokens outlive a
// restart; tokens are bound to the root and the quarantine (device and
// inode), so one root's token is refused by another's worker. Without
// one, the key is drawn at start and an earlier run's entries can no
// longer be restored through fsmcp (the operator still finds them in the
// directory); they are the first to be evicted. It does not keep fifos,
// sockets or devices, which hold no data and which Landlock would need
// extra rights to move; those are unlinked as before.
type Quarantine struct {
	dir      *os.File
	fd       int
	dev, ino uint64
	maxBytes int64
	key      [32]byte

	mu    sync.Mutex
	total int64
	// entries is oldest first: eviction takes from the front.
	entries []*qEntry
	byID    map[uint64]*qEntry
	// used holds the ids of tokens already undone, to tell a replay from
	// an eviction.
	used   map[uint64]bool
	nextID uint64
	// bind is the root's and the quarantine's identity, sealed into
	// every token (persist).
	bind []byte
	// index, when set, is the index in the state directory, appended to
	// as entries come and go.
	index *os.File
	// evictedID is the highest id evicted so far: a checkpoint taken
	// before it may have lost a version it needs.
	evictedID uint64
}

// qPrefix starts every name fsmcp puts in the quarantine; other names
// there are left alone. After it come the time in hex nanoseconds, so
// names sort oldest first across runs, and a random suffix.
const qPrefix = "fsmcp-q-"

// qEntry is what one token undoes: one quarantined name (a delete, a
// write), or every file of a patch, undone all or none.
type qEntry struct {
	bytes int64
	// id is the entry's token number; 0 for entries of an earlier run.
	id    uint64
	busy  bool
	parts []qPart
}

// partKind is what undoing a part does.
type partKind uint8

const (
	// partRestore brings the kept name back to a free path (a deleted
	// entry).
	partRestore partKind = iota
	// partSwap exchanges the kept file with the one that replaced it,
	// which must be unchanged (a write).
	partSwap
	// partTake moves the file at the path, which must be unchanged, into
	// the quarantine: nothing is kept for it (a file a patch created).
	partTake
	// partTruncate cuts an append off the file at the path (the same
	// inode), once its first oldSize bytes still hash to keptSHA; the cut
	// bytes go into the quarantine as a partCut.
	partTruncate
	// partCut is the bytes an undo of an append cut, kept under name
	// until evicted; no token restores them.
	partCut
	// partUncut appends the bytes kept under name back to the file at the
	// path (a rewind cut them off), which must be unchanged since (now,
	// nowSHA); the undo's own token cuts them again (a partTruncate to
	// oldSize).
	partUncut
)

// qPart is one name of an entry.
type qPart struct {
	// name is the part's name in the quarantine, "" for partTake.
	name string
	kind partKind
	// Where it came from: the client's path, the directory that held it
	// and its name there.
	path      string
	parentDev uint64
	parentIno uint64
	base      string
	// For partSwap and partTake, now and nowSHA are the file the change
	// put at the path, which an undo must find unchanged; keptSHA is the
	// content of the kept file ("" when unknown: a deleted tree).
	now     fileID
	nowSHA  string
	keptSHA string
	// gone, for partRestore: the change also removed the directory that
	// held it (a patch's deletions emptied it), so an undo makes the
	// directories of its path again instead of refusing.
	gone bool
	// oldSize is, for partTruncate, the size before the append.
	oldSize int64
}

// fileID is the inode a write put in place and what an in-place change
// would move. ctime is left out: the quarantine's own renames move it.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    unix.Timespec
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim}
}

// OpenQuarantine takes dir (an open directory) as the quarantine, bounded by
// maxBytes, and counts what earlier runs left there, evicting the oldest
// past the bound.
func OpenQuarantine(dir *os.File, maxBytes int64) (*Quarantine, error) {
	q := &Quarantine{dir: dir, fd: int(dir.Fd()), maxBytes: maxBytes, byID: map[uint64]*qEntry{}, used: map[uint64]bool{}}
	var st unix.Stat_t
	if err := unix.Fstat(q.fd, &st); err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, errors.New("quarantine: not a directory")
	}
	q.dev, q.ino = st.Dev, st.Ino
	if _, err := rand.Read(q.key[:]); err != nil {
		return nil, err
	}
	names, err := q.names()
	if err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	slices.Sort(names)
	for _, n := range names {
		size, _, err := dirwalk.Size(q.fd, n, maxWalkDepth)
		if err != nil {
			continue // gone since readdir, or unreadable: not ours to count
		}
		q.entries = append(q.entries, &qEntry{bytes: size, parts: []qPart{{name: n}}})
		q.total += size
	}
	// Eviction waits for settle: a patch a crash interrupted may have
	// kept its old versions here, and recovery needs them.
	return q, nil
}

// settle runs after recovery, before the first RPC: it forgets what
// recovery took back and evicts past the bound.
func (q *Quarantine) settle() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range slices.Clone(q.entries) {
		if _, err := fileio.Lstatat(q.fd, e.parts[0].name); e.id == 0 && errors.Is(err, unix.ENOENT) {
			q.remove(e)
		}
	}
	q.evict()
}

// Fd is the quarantine directory's descriptor, for the Landlock rule.
func (q *Quarantine) Fd() int { return q.fd }

func (q *Quarantine) names() ([]string, error) {
	dup, err := unix.Dup(q.fd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "quarantine")
	defer f.Close()
	all, err := f.Readdirnames(-1)
	var ours []string
	for _, n := range all {
		if strings.HasPrefix(n, qPrefix) {
			ours = append(ours, n)
		}
	}
	return ours, err
}

// sameFS reports whether a name in the directory with device dev can be
// renamed into the quarantine.
func (q *Quarantine) sameFS(dev uint64) bool { return q == nil || dev == q.dev }

// errOtherFS refuses a change whose old content could not be quarantined.
func errOtherFS(op, p string) error {
	return newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, p,
		"%s: the path is on another filesystem than --quarantine, so what it replaces could not be kept; nothing was changed", op)
}

// newName is a fresh name in the quarantine: names sort oldest first.
func (q *Quarantine) newName() string {
	return fmt.Sprintf("%s%016x-%s", qPrefix, time.Now().UnixNano(), randomHex(4))
}

// keep renames name in dirfd into the quarantine as the one part of a new
// entry (whose name it fills in), then evicts past the bound. It returns
// the entry's token, or "" when the entry itself had to be evicted, and
// how many names the entry holds.
func (q *Quarantine) keep(dirfd int, name string, part qPart) (string, int64, error) {
	part.name = q.newName()
	if err := fileio.RenameNoReplace(dirfd, name, q.fd, part.name); err != nil {
		return "", 0, err
	}
	size, count, err := dirwalk.Size(q.fd, part.name, maxWalkDepth)
	if err != nil {
		// Kept, but not measurable: count it as empty rather than fail a
		// change that already happened.
		size, count = 0, 1
	}
	unix.Fsync(q.fd)
	return q.register(&qEntry{bytes: size, parts: []qPart{part}}), count, nil
}

// register adds e, whose parts are in the quarantine already, and evicts
// past the bound. It returns e's token, or "" when e itself had to go.
func (q *Quarantine) register(e *qEntry) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.add(e)
	q.evict()
	if q.byID[e.id] != e {
		return ""
	}
	return q.token(e.id)
}

// add registers e with a fresh id; q.mu is held.
func (q *Quarantine) add(e *qEntry) {
	q.nextID++
	e.id = q.nextID
	q.byID[e.id] = e
	q.entries = append(q.entries, e)
	q.total += e.bytes
	q.record(qindex.Record{Op: qindex.OpAdd, ID: e.id, Bytes: e.bytes, Parts: indexParts(e.parts)}, true)
}

// record appends r to the index, when there is one; q.mu is held. A
// failure is logged: the change itself happened, and only its survival
// across a restart is lost.
func (q *Quarantine) record(r qindex.Record, sync bool) {
	if q.index == nil || r.ID == 0 {
		return
	}
	if err := qindex.Append(q.index, r, sync); err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp worker: quarantine index: %v\n", err)
	}
}

// Seq is the id of the newest entry: those a later change makes are
// numbered above it.
func (q *Quarantine) Seq() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nextID
}

// EvictedID is the highest id evicted so far.
func (q *Quarantine) EvictedID() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.evictedID
}

// persist keeps the quarantine's index and token key in the state
// directory stateFD, binding tokens to the root (rootDev, rootIno) and the
// quarantine: entries the index names come back with their ids, so their
// tokens work again; names it does not know stay as an earlier run's.
func (q *Quarantine) persist(stateFD int, rootDev, rootIno uint64) error {
	key, err := qindex.Key(stateFD)
	if err != nil {
		return fmt.Errorf("quarantine key: %w", err)
	}
	st, err := qindex.Load(stateFD)
	if err != nil {
		return fmt.Errorf("quarantine index: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.key = key
	q.bind = binary.BigEndian.AppendUint64(nil, rootDev)
	q.bind = binary.BigEndian.AppendUint64(q.bind, rootIno)
	q.bind = binary.BigEndian.AppendUint64(q.bind, q.dev)
	q.bind = binary.BigEndian.AppendUint64(q.bind, q.ino)
	known := map[string]bool{}
	var kept []qindex.Entry
	for _, ie := range st.Entries {
		e := &qEntry{id: ie.ID, bytes: ie.Bytes}
		whole := true
		for _, ip := range ie.Parts {
			part := fromIndex(ip)
			if part.name != "" {
				if _, err := fileio.Lstatat(q.fd, part.name); err != nil {
					whole = false
				}
				known[part.name] = true
			}
			e.parts = append(e.parts, part)
		}
		if !whole {
			continue
		}
		kept = append(kept, ie)
		q.byID[e.id] = e
	}
	var old []*qEntry
	for _, e := range q.entries {
		if !known[e.parts[0].name] {
			old = append(old, e)
		} else {
			q.total -= e.bytes
		}
	}
	q.entries = old
	for _, ie := range kept {
		e := q.byID[ie.ID]
		q.entries = append(q.entries, e)
		q.total += e.bytes
	}
	q.used = st.Used
	q.nextID = max(q.nextID, st.MaxID)
	st.Entries = kept
	if q.index, err = qindex.Rewrite(stateFD, st); err != nil {
		return fmt.Errorf("quarantine index: %w", err)
	}
	return nil
}

func indexParts(parts []qPart) []qindex.Part {
	out := make([]qindex.Part, len(parts))
	for i, p := range parts {
		out[i] = qindex.Part{Name: p.name, Kind: uint8(p.kind), Path: []byte(p.path), ParentDev: p.parentDev, ParentIno: p.parentIno,
			Base: []byte(p.base), NowDev: p.now.dev, NowIno: p.now.ino, NowSize: p.now.size, NowSec: p.now.mtime.Sec, NowNsec: p.now.mtime.Nsec,
			NowSHA: p.nowSHA, KeptSHA: p.keptSHA, Gone: p.gone, OldSize: p.oldSize}
	}
	return out
}

func fromIndex(p qindex.Part) qPart {
	return qPart{name: p.Name, kind: partKind(p.Kind), path: string(p.Path), parentDev: p.ParentDev, parentIno: p.ParentIno, base: string(p.Base),
		now:    fileID{dev: p.NowDev, ino: p.NowIno, size: p.NowSize, mtime: unix.Timespec{Sec: p.NowSec, Nsec: p.NowNsec}},
		nowSHA: p.NowSHA, keptSHA: p.KeptSHA, gone: p.Gone, oldSize: p.OldSize}
}

// evict removes the oldest entries (never one an undo is using) until the
// total is within the bound; q.mu is held.
func (q *Quarantine) evict() {
	for i := 0; q.total > q.maxBytes && i < len(q.entries); {
		e := q.entries[i]
		if e.busy {
			i++
			continue
		}
		q.remove(e)
		q.evictedID = max(q.evictedID, e.id)
		for _, part := range e.parts {
			if part.name == "" {
				continue
			}
			if err := (&dirwalk.Remover{Ctx: context.Background()}).RemoveAll(q.fd, part.name); err != nil {
				fmt.Fprintf(os.Stderr, "fsmcp worker: quarantine: evicting %s: %v\n", part.name, err)
			}
		}
	}
}

// remove forgets e; q.mu is held.
func (q *Quarantine) remove(e *qEntry) {
	if i := slices.Index(q.entries, e); i >= 0 {
		q.entries = slices.Delete(q.entries, i, i+1)
	}
	delete(q.byID, e.id)
	q.total -= e.bytes
	q.record(qindex.Record{Op: qindex.OpDel, ID: e.id}, false)
}

// tokenLen is a token's length before encoding: the id and a truncated
// HMAC-SHA256.
const tokenLen = 8 + 16

func (q *Quarantine) token(id uint64) string {
	var b [tokenLen]byte
	binary.BigEndian.PutUint64(b[:8], id)
	copy(b[8:], q.mac(b[:8]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (q *Quarantine) mac(id []byte) []byte {
	m := hmac.New(sha256.New, q.key[:])
	m.Write([]byte("fsmcp undo v2\x00"))
	m.Write(q.bind)
	m.Write(id)
	return m.Sum(nil)[:16]
}

// take claims the entry a token names for one undo: a token this run did
// not seal is invalid_argument, one already undone precondition_failed,
// one whose entry was evicted not_found.
func (q *Quarantine) take(token string) (*qEntry, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != tokenLen || !hmac.Equal(b[8:], q.mac(b[:8])) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "undo: not an undo token of this server's root and quarantine")
	}
	id := binary.BigEndian.Uint64(b[:8])
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.byID[id]
	switch {
	case q.used[id]:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, "", "undo: this token was already used")
	case e == nil:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, "", "undo: the quarantined copy was evicted to keep within --quarantine-bytes")
	case e.busy:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, "", "undo: another undo of this token is running")
	}
	e.busy = true
	return e, nil
}

// release ends an undo of e: done, the token is spent and the entry
// forgotten (restored whole, or re-registered by the caller); otherwise the
// token stays good.
func (q *Quarantine) release(e *qEntry, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e.busy = false
	if done {
		q.used[e.id] = true
		q.record(qindex.Record{Op: qindex.OpUsed, ID: e.id}, false)
		q.remove(e)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
