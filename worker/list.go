package worker

import (
	"context"
	"errors"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/dirent"
	"github.com/fsmcp/fsmcp/worker/internal/paging"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// List implements fsmcpv1.WorkerServiceServer. One page of one directory,
// in a total order: by name bytes, or by size or mtime (largest or newest
// first) with ties by name bytes. A page holds the entries that follow the
// request's position (after, and after_key for a sort by number) in that
// order, until their names add up to req.MaxBytes (plus a per-entry
// allowance for the reply's other fields).
//
// The directory is read in chunks and only the page is kept (a keyedPage,
// as fs_glob's), so memory follows the page, not the directory: a sort by
// size or mtime, and totals, lstat every entry of the directory on every
// page, and nothing more is held. The call's deadline bounds the time.
func (s *Service) List(ctx context.Context, req *fsmcpv1.ListRequest) (*fsmcpv1.ListResponse, error) {
	switch req.GetSort() {
	case fsmcpv1.ListingSort_LISTING_SORT_UNSPECIFIED, fsmcpv1.ListingSort_LISTING_SORT_PATH,
		fsmcpv1.ListingSort_LISTING_SORT_SIZE, fsmcpv1.ListingSort_LISTING_SORT_MTIME:
	default:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "list: unknown sort %d", req.GetSort())
	}
	d, _, rel, p, err := s.openListing(ctx, "list", req.GetPath())
	if err != nil {
		return nil, err
	}
	defer d.Close()
	raw, err := d.SyscallConn()
	if err != nil {
		return nil, fsError("readdir", p, err)
	}
	var resp *fsmcpv1.ListResponse
	// One hold on the descriptor for the whole listing: every read of the
	// directory and every fstatat on it uses the same number.
	if cerr := raw.Control(func(fd uintptr) { resp, err = s.listDir(ctx, int(fd), rel, p, req) }); cerr != nil {
		return nil, fsError("readdir", p, cerr)
	}
	return resp, err
}

// listDir is List on the open directory fd, whose real root-relative path
// is rel and client path p.
func (s *Service) listDir(ctx context.Context, fd int, rel, p string, req *fsmcpv1.ListRequest) (*fsmcpv1.ListResponse, error) {
	order := req.GetSort()
	byNumber := order == fsmcpv1.ListingSort_LISTING_SORT_SIZE || order == fsmcpv1.ListingSort_LISTING_SORT_MTIME
	budget := req.GetMaxBytes()
	if budget <= 0 {
		budget = 1 << 20
	}
	var after []byte
	if req.GetHasAfter() {
		after = req.GetAfter()
		if byNumber {
			after = append(paging.AppendDescending(nil, req.GetAfterKey()), after...)
		}
	}
	page := paging.NewKeyed(after, req.GetHasAfter(), budget,
		func(it *listItem) []byte { return it.key },
		func(it *listItem) int64 { return int64(len(it.key)-it.off) + entryAllowance },
		(*listItem).clone)
	// Every entry is lstat'ed when its key or the totals need it; else
	// only the page's entries are.
	statAll := byNumber || req.GetTotals()
	var totals fsmcpv1.ListTotals
	var it listItem
	err := readNames(ctx, fd, func(name []byte) error {
		if isTempName(dirent.String(name)) {
			return nil
		}
		it.key, it.off, it.stated = it.key[:0], 0, false
		if statAll {
			if gone, err := dirent.Lstat(fd, name, &it.st); gone {
				return nil // removed since the directory was read
			} else if err != nil {
				return fsError("lstat", p, err)
			}
			it.stated = true
			count(&totals, &it.st)
		}
		if byNumber {
			n := it.st.Size
			if order == fsmcpv1.ListingSort_LISTING_SORT_MTIME {
				n = it.st.Mtim.Nano()
			}
			it.key = paging.AppendDescending(it.key, n)
			it.off = len(it.key)
		}
		it.key = append(it.key, name...)
		page.Add(&it)
		return nil
	})
	if err != nil {
		return nil, fsError("readdir", p, err)
	}
	items, more := page.Result()
	if !statAll {
		if err := statItems(fd, items); err != nil {
			return nil, fsError("lstat", p, err)
		}
	}
	cols := &fsmcpv1.EntryColumns{
		NameEnds:       make([]uint32, 0, len(items)),
		Types:          make([]fsmcpv1.FileType, 0, len(items)),
		Sizes:          make([]int64, 0, len(items)),
		MtimesUnixNano: make([]int64, 0, len(items)),
		Modes:          make([]uint32, 0, len(items)),
	}
	room := 0
	for _, it := range items {
		room += len(it.key) - it.off
	}
	cols.Names = make([]byte, 0, room)
	for _, it := range items {
		if it.gone {
			continue
		}
		name := it.key[it.off:]
		if it.st.Nlink > 1 {
			// Only a file with other names can teach the policy a link.
			s.note(joinRel(rel, string(name)), &it.st)
		}
		cols.Names = append(cols.Names, name...)
		cols.NameEnds = append(cols.NameEnds, uint32(len(cols.Names)))
		cols.Types = append(cols.Types, fileType(it.st.Mode))
		cols.Sizes = append(cols.Sizes, it.st.Size)
		cols.MtimesUnixNano = append(cols.MtimesUnixNano, it.st.Mtim.Nano())
		cols.Modes = append(cols.Modes, it.st.Mode&0o7777)
	}
	resp := &fsmcpv1.ListResponse{More: more, Columns: cols}
	if req.GetTotals() {
		resp.Totals = &totals
	}
	return resp, nil
}

// listItem is one entry on its way through a page: its key (for a sort by
// number, the number's descending bytes, then from off the name) and its
// lstat, when taken.
type listItem struct {
	key    []byte
	off    int
	stated bool
	gone   bool
	st     unix.Stat_t
}

// statItems lstats a page's items, a long page in up to listStatters
// goroutines at once: the kernel's lookups of the names are independent,
// and they are most of a listing's time. An item removed since the
// directory was read is marked gone.
func statItems(fd int, items []*listItem) error {
	stat := func(part []*listItem) error {
		for _, it := range part {
			gone, err := dirent.Lstat(fd, it.key[it.off:], &it.st)
			if err != nil {
				return err
			}
			it.gone = gone
		}
		return nil
	}
	workers := min(listStatters, len(items)/listStatRun)
	if workers <= 1 {
		return stat(items)
	}
	var g errgroup.Group
	per := (len(items) + workers - 1) / workers
	for start := 0; start < len(items); start += per {
		part := items[start:min(start+per, len(items))]
		g.Go(func() error { return stat(part) })
	}
	return g.Wait()
}

// listStatters bounds the goroutines that lstat one page; each takes at
// least listStatRun names, so a short page is one run.
const (
	listStatters = 4
	listStatRun  = 128
)

// clone copies an item that the page keeps: the loop reuses its own.
func (it *listItem) clone() *listItem {
	c := *it
	c.key = append([]byte(nil), it.key...)
	return &c
}

// count adds one entry to t: a directory, or a file (an entry of any
// other type) whose size adds to bytes, as the page lists it.
func count(t *fsmcpv1.ListTotals, st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		t.Directories++
		return
	}
	t.Files++
	t.Bytes += st.Size
}

// direntBufs holds the buffers readNames reads directories into: 32 KiB
// takes about a thousand names in one getdents.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readNames calls each with every name in the directory fd but "." and
// "..", read with dirent.Read into a pooled buffer, so that a name costs
// no allocation: name is valid only during the call.
func readNames(ctx context.Context, fd int, each func(name []byte) error) error {
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	err := dirent.Read(ctx, fd, *bp, func(name []byte, _ byte) error { return each(name) })
	if errors.Is(err, dirent.ErrMalformed) {
		bug(err)
	}
	return err
}
