package worker

import (
	"context"
	"errors"
	"io"
	"syscall"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
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
	var byNumber bool
	switch req.GetSort() {
	case fsmcpv1.ListingSort_LISTING_SORT_UNSPECIFIED, fsmcpv1.ListingSort_LISTING_SORT_PATH:
	case fsmcpv1.ListingSort_LISTING_SORT_SIZE, fsmcpv1.ListingSort_LISTING_SORT_MTIME:
		byNumber = true
	default:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "list: unknown sort %d", req.GetSort())
	}
	d, _, rel, p, err := s.openListing("list", req.GetPath())
	if err != nil {
		return nil, err
	}
	defer d.Close()
	raw, err := d.SyscallConn()
	if err != nil {
		return nil, fsError("readdir", p, err)
	}
	budget := req.GetMaxBytes()
	if budget <= 0 {
		budget = 1 << 20
	}
	var after []byte
	if req.GetHasAfter() {
		after = req.GetAfter()
		if byNumber {
			after = append(appendDescending(nil, req.GetAfterKey()), after...)
		}
	}
	page := newKeyedPage(after, req.GetHasAfter(), budget,
		func(it *listItem) []byte { return it.key },
		func(it *listItem) int64 { return int64(len(it.key)-it.off) + entryAllowance },
		(*listItem).clone)
	// Every entry is lstat'ed when its key or the totals need it; else
	// only the page's entries are.
	statAll := byNumber || req.GetTotals()
	var totals fsmcpv1.ListTotals
	var it listItem
	seen := 0
	for {
		names, rerr := d.Readdirnames(listChunk)
		for _, name := range names {
			if seen++; seen%256 == 0 && ctx.Err() != nil {
				return nil, fsError("readdir", p, ctx.Err())
			}
			if isTempName(name) {
				continue
			}
			it.key, it.off, it.stated = it.key[:0], 0, false
			if statAll {
				if gone, err := lstatAt(raw, name, &it.st); gone {
					continue // removed since readdir
				} else if err != nil {
					return nil, fsError("lstat", p, err)
				}
				it.stated = true
				count(&totals, &it.st)
			}
			if byNumber {
				n := it.st.Size
				if req.GetSort() == fsmcpv1.ListingSort_LISTING_SORT_MTIME {
					n = it.st.Mtim.Nano()
				}
				it.key = appendDescending(it.key, n)
				it.off = len(it.key)
			}
			it.key = append(it.key, name...)
			page.add(&it)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, fsError("readdir", p, rerr)
		}
	}
	items, more := page.result()
	resp := &fsmcpv1.ListResponse{More: more, Entries: make([]*fsmcpv1.Entry, 0, len(items))}
	for _, it := range items {
		name := it.key[it.off:]
		if !it.stated {
			if gone, err := lstatAt(raw, string(name), &it.st); gone {
				continue
			} else if err != nil {
				return nil, fsError("lstat", p, err)
			}
		}
		s.note(joinRel(rel, string(name)), &it.st)
		resp.Entries = append(resp.Entries, &fsmcpv1.Entry{
			Name:          name,
			Type:          fileType(it.st.Mode),
			Size:          it.st.Size,
			MtimeUnixNano: it.st.Mtim.Nano(),
			Mode:          it.st.Mode & 0o7777,
			Nlink:         uint64(it.st.Nlink),
		})
	}
	if req.GetTotals() {
		resp.Totals = &totals
	}
	return resp, nil
}

// listChunk is how many names one read of a directory returns.
const listChunk = 1024

// listItem is one entry on its way through a page: its key (for a sort by
// number, the number's descending bytes, then from off the name) and its
// lstat, when taken.
type listItem struct {
	key    []byte
	off    int
	stated bool
	st     unix.Stat_t
}

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

// lstatAt lstats name in the directory whose descriptor raw holds, with
// fstatat: no path string outside the Root is ever walked. gone reports a
// name removed since the directory was read.
func lstatAt(raw syscall.RawConn, name string, st *unix.Stat_t) (gone bool, err error) {
	if cerr := raw.Control(func(fd uintptr) {
		err = unix.Fstatat(int(fd), name, st, unix.AT_SYMLINK_NOFOLLOW)
	}); cerr != nil {
		return false, cerr
	}
	if errors.Is(err, unix.ENOENT) {
		return true, nil
	}
	return false, err
}
