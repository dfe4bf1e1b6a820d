// Package paging keeps one page of a listing whose items arrive in any
// order, in memory bounded by about twice the page: the items with the
// smallest keys after a cursor, up to a budget of estimated reply bytes.
// The cursor is the key of a page's last item, so that following pages
// neither repeat nor skip an item that did not change. It trusts its input
// no more than the reply it builds: every cost is estimated, and the
// front-end cuts pages exactly.
package paging

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sort"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/fsmcp/fsmcp/worker/internal/rgjson"
)

const (
	// DefaultBytes is the page budget when the request sets none.
	DefaultBytes = 1 << 20
	// PathAllowance estimates the JSON a listed path costs beyond its
	// bytes.
	PathAllowance = 16
	// lineAllowance and submatchAllowance estimate the JSON a line and a
	// submatch cost beyond their text; the front-end cuts pages exactly.
	lineAllowance     = 96
	submatchAllowance = 32
)

// Budget is the estimated reply size a page stops at.
func Budget(maxBytes int64) int64 {
	if maxBytes <= 0 {
		return DefaultBytes
	}
	return maxBytes
}

// Keyed keeps the items with the smallest keys after a cursor whose
// estimated cost reaches a budget, and no more: memory stays bounded however
// many items are offered. Items arrive in any order; the key orders them
// (bytes), and the cursor is the key of the last item of a page. Items are
// appended as they come; whenever what is held costs twice the budget, it
// is sorted and cut back to the page, and from then on an item whose key
// sorts after the page's last is dropped at once.
type Keyed[T any] struct {
	after    []byte
	hasAfter bool
	budget   int64
	items    []T
	cost     int64
	// bound, once set, is the key of the page's last item: a key after
	// it cannot make the page.
	bound    []byte
	hasBound bool
	dropped  bool
	// key returns an item's key; cost estimates its share of the reply;
	// keep copies what the page keeps of an item whose memory is shared.
	keyOf  func(T) []byte
	costOf func(T) int64
	keep   func(T) T
}

// NewKeyed is a page after the cursor after (when hasAfter) that stops at
// budget.
func NewKeyed[T any](after []byte, hasAfter bool, budget int64, key func(T) []byte, cost func(T) int64, keep func(T) T) *Keyed[T] {
	return &Keyed[T]{after: after, hasAfter: hasAfter, budget: budget, keyOf: key, costOf: cost, keep: keep}
}

// Paths is a Keyed of paths, ordered by their bytes.
type Paths = Keyed[[]byte]

// NewPaths is a Paths after the cursor after (when hasAfter).
func NewPaths(after []byte, hasAfter bool, budget int64) *Paths {
	return NewKeyed(after, hasAfter, budget, func(p []byte) []byte { return p },
		func(p []byte) int64 { return int64(len(p)) + PathAllowance }, bytes.Clone)
}

// Add offers item to the page.
func (pp *Keyed[T]) Add(item T) {
	k := pp.keyOf(item)
	if pp.hasAfter && bytes.Compare(k, pp.after) <= 0 {
		return
	}
	if pp.hasBound && bytes.Compare(k, pp.bound) > 0 {
		pp.dropped = true
		return
	}
	item = pp.keep(item)
	pp.items = append(pp.items, item)
	if pp.cost += pp.costOf(item); pp.cost >= 2*pp.budget {
		pp.cut()
	}
}

// cut sorts the items and keeps the shortest run of the first ones whose
// cost reaches the budget.
func (pp *Keyed[T]) cut() {
	pp.sort()
	var cost int64
	for i, it := range pp.items {
		if cost += pp.costOf(it); cost >= pp.budget {
			if i+1 < len(pp.items) {
				clear(pp.items[i+1:])
				pp.items = pp.items[:i+1]
				pp.dropped = true
			}
			pp.bound, pp.hasBound = pp.keyOf(it), true
			break
		}
	}
	pp.cost = cost
}

// parallelSort is the fewest items a page sorts in two halves side by
// side, then merges: a page is sorted once rg has ended, when both cores
// are free.
const parallelSort = 4096

// sort orders the items by key.
func (pp *Keyed[T]) sort() {
	cmp := func(a, b T) int { return bytes.Compare(pp.keyOf(a), pp.keyOf(b)) }
	if len(pp.items) < parallelSort {
		slices.SortFunc(pp.items, cmp)
		return
	}
	lo, hi := pp.items[:len(pp.items)/2], pp.items[len(pp.items)/2:]
	var wg sync.WaitGroup
	wg.Go(func() { slices.SortFunc(hi, cmp) })
	slices.SortFunc(lo, cmp)
	wg.Wait()
	merged := make([]T, 0, cap(pp.items))
	for len(lo) > 0 && len(hi) > 0 {
		if cmp(hi[0], lo[0]) < 0 {
			merged, hi = append(merged, hi[0]), hi[1:]
		} else {
			merged, lo = append(merged, lo[0]), lo[1:]
		}
	}
	merged = append(append(merged, lo...), hi...)
	clear(pp.items)
	pp.items = merged
}

// Result returns the page in order and whether items follow it.
func (pp *Keyed[T]) Result() ([]T, bool) {
	pp.cut()
	return pp.items, pp.dropped
}

// A sort by mtime (fs_glob's) orders paths newest first, ties by path
// bytes, and pages them with the same keyed page as by path: the key is
// the mtime, inverted and big-endian so that bytes order it newest first,
// then the path. A cursor is the key of the last path of a page, so a page never
// repeats or skips a path whose mtime did not change; a path that changed
// moves to its new place, before or after the cursor.

const mtimeKeyBytes = 8

// MtimeKey is the key of the path p with that mtime.
func MtimeKey(mtime int64, p []byte) []byte {
	return append(AppendDescending(make([]byte, 0, mtimeKeyBytes+len(p)), mtime), p...)
}

// AppendDescending appends n to b so that bytes order larger numbers
// first: fs_list's sorts by size and mtime key entries the same way.
func AppendDescending(b []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(b, ^(uint64(n) ^ 1<<63))
}

// SplitMtimeKey returns the mtime and the path of a key.
func SplitMtimeKey(k []byte) (int64, []byte) {
	return int64(^binary.BigEndian.Uint64(k) ^ 1<<63), k[mtimeKeyBytes:]
}

// NewMtime is a page of mtime keys after the path after with afterMtime
// (when hasAfter).
func NewMtime(after []byte, afterMtime int64, hasAfter bool, budget int64) *Paths {
	var k []byte
	if hasAfter {
		k = MtimeKey(afterMtime, after)
	}
	return NewKeyed(k, hasAfter, budget, func(k []byte) []byte { return k },
		func(k []byte) int64 { return int64(len(k)) + PathAllowance + mtimeAllowance }, bytes.Clone)
}

// mtimeAllowance is what a listed mtime adds to the reply.
const mtimeAllowance = 48

// Lines keeps, of all the lines rg reports, the first ones after a
// position (path, then offset) whose estimated cost reaches a budget.
// rg reports each file's lines in order, between its begin and end
// events, but files in any order: a file's lines are gathered in a block,
// and a block is kept only while the blocks before it do not fill the
// page. Memory stays bounded by about twice the budget.
type Lines struct {
	after       []byte
	afterOffset int64
	hasAfter    bool
	budget      int64
	// blocks are the kept blocks, sorted by path; cost is their total.
	blocks  []*Block
	cost    int64
	dropped bool
	// open are the blocks begun and not ended, by rg's path.
	open map[string]*Block
	// display names a path as rg printed it, or reports false for one
	// that must not be shown.
	display func(rgPath []byte) ([]byte, bool)
}

// NewLines is a page of lines after the position (after, afterOffset),
// when hasAfter, that stops at budget; display names rg's paths.
func NewLines(after []byte, afterOffset int64, hasAfter bool, budget int64, display func([]byte) ([]byte, bool)) *Lines {
	return &Lines{after: after, afterOffset: afterOffset, hasAfter: hasAfter, budget: budget,
		open: map[string]*Block{}, display: display}
}

// Block holds the lines of one file.
type Block struct {
	path  []byte
	lines []*fsmcpv1.GrepLine
	cost  int64
	// skip: the block's file is hidden, or wholly before the cursor, or
	// sorts after a full page; its lines are counted, not kept.
	skip bool
	// full: lines were left out after the last one kept.
	full bool
}

// Block returns the open block of rgPath, starting one if needed.
func (lp *Lines) Block(rgPath []byte) *Block {
	if b, ok := lp.open[string(rgPath)]; ok {
		return b
	}
	p, ok := lp.display(rgPath)
	b := &Block{path: bytes.Clone(p), skip: !ok}
	switch {
	case !ok:
	case lp.hasAfter && bytes.Compare(p, lp.after) < 0:
		b.skip = true
	case lp.cost >= lp.budget && len(lp.blocks) > 0 && bytes.Compare(p, lp.blocks[len(lp.blocks)-1].path) > 0:
		b.skip = true
		lp.dropped = true
	}
	lp.open[string(rgPath)] = b
	return b
}

// Line records a match or context line; it reports false if the line's
// file must not be shown at all.
func (lp *Lines) Line(ev *rgjson.Event) bool {
	b := lp.Block(ev.Path)
	if b.path == nil && b.skip {
		return false
	}
	switch {
	case b.skip:
		return true
	case lp.hasAfter && bytes.Equal(b.path, lp.after) && ev.Offset <= lp.afterOffset:
		return true
	case b.cost >= lp.budget:
		b.full = true
		return true
	}
	l := &fsmcpv1.GrepLine{
		Path:                b.path,
		LineNumber:          ev.LineNumber,
		Offset:              ev.Offset,
		Text:                bytes.Clone(ev.Text),
		Context:             ev.Type == rgjson.Context,
		LineLength:          ev.TextLen,
		SubmatchesTruncated: ev.MoreSubmatches,
	}
	if len(ev.Submatches) > 0 {
		l.Submatches = make([]*fsmcpv1.Submatch, len(ev.Submatches))
		for i, m := range ev.Submatches {
			l.Submatches[i] = &fsmcpv1.Submatch{Start: m.Start, End: m.End}
		}
	}
	b.lines = append(b.lines, l)
	b.cost += lineCost(l)
	return true
}

func lineCost(l *fsmcpv1.GrepLine) int64 {
	return int64(len(l.Path)+len(l.Text)*4/3) + lineAllowance + int64(len(l.Submatches))*submatchAllowance
}

// End closes the block of rgPath; it reports whether the file counts as
// searched (it is not hidden from results).
func (lp *Lines) End(rgPath []byte) bool {
	b, ok := lp.open[string(rgPath)]
	if !ok {
		return false
	}
	delete(lp.open, string(rgPath))
	lp.keep(b)
	return b.path != nil
}

// CloseAll closes every open block, at the end of rg's output.
func (lp *Lines) CloseAll() {
	for k, b := range lp.open {
		delete(lp.open, k)
		lp.keep(b)
	}
}

// keep inserts a finished block in path order, then drops the last blocks
// for as long as the ones before them fill the page.
func (lp *Lines) keep(b *Block) {
	if b.skip || len(b.lines) == 0 && !b.full {
		return
	}
	i := sort.Search(len(lp.blocks), func(i int) bool { return bytes.Compare(lp.blocks[i].path, b.path) >= 0 })
	lp.blocks = append(lp.blocks, nil)
	copy(lp.blocks[i+1:], lp.blocks[i:])
	lp.blocks[i] = b
	lp.cost += b.cost
	for len(lp.blocks) > 1 {
		last := lp.blocks[len(lp.blocks)-1]
		if lp.cost-last.cost < lp.budget {
			break
		}
		lp.blocks = lp.blocks[:len(lp.blocks)-1]
		lp.cost -= last.cost
		lp.dropped = true
	}
}

// Result returns the page's lines in order and whether lines follow. A
// full block ends the page: the lines it left out come before any later
// block's.
func (lp *Lines) Result() ([]*fsmcpv1.GrepLine, bool) {
	var out []*fsmcpv1.GrepLine
	var cost int64
	for _, b := range lp.blocks {
		for _, l := range b.lines {
			if cost >= lp.budget {
				return out, true
			}
			out = append(out, l)
			cost += lineCost(l)
		}
		if b.full {
			return out, true
		}
	}
	return out, lp.dropped
}

// Keeps reports whether the block's next lines are kept; when not, they
// are counted only.
func (b *Block) Keeps() bool { return !b.skip && !b.full }

// Shown reports whether the block's file is shown at all.
func (b *Block) Shown() bool { return b.path != nil }

// Objects renders paths as they stand in the reply's text, the JSON
// string that carries its document: {"path":…} each, escaped once more,
// separated by commas, and where each object ends. One block crosses to
// the front-end, which checks it and places it in the reply's text as it
// is: the paths are escaped once, here, for the reply's document and its
// text together.
func Objects(paths [][]byte) ([]byte, []uint32) {
	n := 0
	for _, p := range paths {
		n += len(p) + len(p)/8 + 16
	}
	b := make([]byte, 0, n)
	ends := make([]uint32, len(paths))
	for i, p := range paths {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendNameText(b, "path", p)
		ends[i] = uint32(len(b))
	}
	return b, ends
}
