package lines

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
	"golang.org/x/sys/unix"
)

const (
	// minStride is the distance between marks of a small file.
	minStride = 64 << 10
	// maxMarksPerFile bounds one file's marks; a larger file gets a
	// longer stride.
	maxMarksPerFile = 1 << 16
	// maxMarks bounds the marks of all files together (8 bytes each).
	maxMarks = 1 << 20
	// maxIndexedFiles bounds how many file versions are remembered.
	maxIndexedFiles = 1024
	// scanBytes is the read size of a scan; a multiple of every stride.
	scanBytes = 256 << 10
)

// lineMarks is the index of one file version. nl[i] is the count of '\n'
// in the first i*stride bytes; the marks cover the first
// (len(nl)-1)*stride bytes, or the whole file when complete. A lineMarks
// is never changed once shared: a scan that learns more builds a new one.
type lineMarks struct {
	stride int64
	nl     []int64
	// complete: the whole file is counted, and lines is its line count.
	complete bool
	lines    int64
}

// Index is the line index of recently read file versions.
type Index struct {
	mu     sync.Mutex
	files  map[hashcache.Key]*lineMarks
	order  []hashcache.Key
	marks  int
	settle time.Duration
	// scanned counts the bytes read to count lines; tests use it to tell
	// an index hit from a scan.
	scanned int64
}

// NewIndex is an empty index.
func NewIndex() *Index {
	return &Index{files: make(map[hashcache.Key]*lineMarks), settle: time.Second}
}

func strideFor(size int64) int64 {
	s := int64(minStride)
	for size/s >= maxMarksPerFile {
		s *= 2
	}
	return s
}

func (x *Index) get(k hashcache.Key, size int64) *lineMarks {
	x.mu.Lock()
	defer x.mu.Unlock()
	if m, ok := x.files[k]; ok {
		return m
	}
	return &lineMarks{stride: strideFor(size), nl: []int64{0}}
}

// put remembers m for the version st, if st has settled (a write in the
// same timestamp tick would not change the key) and m knows more than what
// is remembered already.
func (x *Index) put(st *unix.Stat_t, m *lineMarks) {
	k := hashcache.KeyOf(st)
	if time.Since(time.Unix(0, st.Ctim.Nano())) < x.settle {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	old, ok := x.files[k]
	if ok {
		if len(old.nl) >= len(m.nl) && (old.complete || !m.complete) {
			return
		}
		x.marks -= len(old.nl)
	} else {
		x.order = append(x.order, k)
	}
	x.files[k] = m
	x.marks += len(m.nl)
	for (x.marks > maxMarks || len(x.order) > maxIndexedFiles) && len(x.order) > 1 {
		oldest := x.order[0]
		x.order = x.order[1:]
		x.marks -= len(x.files[oldest].nl)
		delete(x.files, oldest)
	}
}

// Locate returns where line (1-based, or negative from the end) starts in
// f, the version st, and its number. A line past the end starts at the end
// of the file; a tail longer than the file starts at line 1.
func (x *Index) Locate(ctx context.Context, f *os.File, st *unix.Stat_t, line int64) (offset, first int64, err error) {
	ls := x.scan(ctx, f, st)
	defer func() {
		if ls.grew {
			x.put(st, ls.m)
		}
	}()
	if line > 0 {
		start, _, err := ls.start(line)
		return start, line, err
	}
	start, err := ls.tail(-line)
	if err != nil {
		return 0, 0, err
	}
	if ls.m.complete {
		return start, max(ls.m.lines+line+1, 1), nil
	}
	// A tail's number counts the lines before it, once: the count is
	// kept, so the next tail of this version reads only itself.
	if first, err = ls.lineAt(start); err != nil {
		return start, 0, err
	}
	_, err = ls.total()
	return start, first, err
}

// lineScan reads one file version to count its lines, extending a copy of
// its marks as it goes.
type lineScan struct {
	ctx context.Context
	f   *os.File
	st  *unix.Stat_t
	m   *lineMarks
	// grew: m holds more than the index had.
	grew bool
	x    *Index
}

func (x *Index) scan(ctx context.Context, f *os.File, st *unix.Stat_t) *lineScan {
	return &lineScan{ctx: ctx, f: f, st: st, m: x.get(hashcache.KeyOf(st), st.Size), x: x}
}

// extend counts forward from the end of the marks until pred says stop
// (given the offset and '\n' count at the end of each stride) or the file
// ends.
func (ls *lineScan) extend(stop func(off, nl int64) bool) error {
	m := ls.m
	if m.complete {
		return nil
	}
	nl := slices.Clone(m.nl)
	off := int64(len(nl)-1) * m.stride
	bp := fileio.Buffers.Get().(*[]byte)
	defer fileio.Buffers.Put(bp)
	buf := (*bp)[:scanBytes]
	if m.stride > scanBytes {
		// Only a file of many GiB has strides this long.
		buf = make([]byte, m.stride)
	}
	complete := false
	for {
		if err := ls.ctx.Err(); err != nil {
			return err
		}
		if stop(off, nl[len(nl)-1]) {
			break
		}
		n, err := ls.f.ReadAt(buf, off)
		ls.x.mu.Lock()
		ls.x.scanned += int64(n)
		ls.x.mu.Unlock()
		for i := int64(0); i < int64(n); i += m.stride {
			chunk := buf[i:min(i+m.stride, int64(n))]
			c := nl[len(nl)-1] + int64(bytes.Count(chunk, []byte{'\n'}))
			if int64(len(chunk)) == m.stride {
				nl = append(nl, c)
				continue
			}
			// The file ends inside this stride.
			if off+int64(n) != ls.st.Size {
				return io.ErrUnexpectedEOF
			}
			complete = true
			ls.m = &lineMarks{stride: m.stride, nl: nl, complete: true, lines: c + lastLine(buf[:n], ls.st.Size)}
			break
		}
		if complete {
			break
		}
		off += int64(n)
		if off >= ls.st.Size {
			// The file ends exactly at a stride.
			complete = true
			last := nl[len(nl)-1]
			if n == 0 && ls.st.Size > 0 {
				// The marks already ended at the end of the file:
				// read its last byte.
				if n, err = ls.f.ReadAt(buf[:1], ls.st.Size-1); n != 1 {
					return io.ErrUnexpectedEOF
				}
				last += lastLine(buf[:1], ls.st.Size)
			} else {
				last += lastLine(buf[:n], ls.st.Size)
			}
			ls.m = &lineMarks{stride: m.stride, nl: nl, complete: true, lines: last}
			break
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	if !complete {
		ls.m = &lineMarks{stride: m.stride, nl: nl}
	}
	ls.grew = true
	return nil
}

// lastLine is 1 when the file, whose last bytes are tail, ends with a line
// that has no '\n'.
func lastLine(tail []byte, size int64) int64 {
	if size > 0 && len(tail) > 0 && tail[len(tail)-1] != '\n' {
		return 1
	}
	return 0
}

// start returns the offset where line n (n >= 1) starts, or the file's
// size and false when the file has fewer lines.
func (ls *lineScan) start(n int64) (int64, bool, error) {
	if n == 1 {
		return 0, ls.st.Size > 0, nil
	}
	want := n - 1 // the '\n' that ends line n-1
	if err := ls.extend(func(_, nl int64) bool { return nl >= want }); err != nil {
		return 0, false, err
	}
	m := ls.m
	// The last mark with fewer than want newlines before it: the wanted
	// '\n' lies in the stride that follows it.
	i := max(sort.Search(len(m.nl), func(i int) bool { return m.nl[i] >= want })-1, 0)
	off, seen := int64(i)*m.stride, m.nl[i]
	bp := fileio.Buffers.Get().(*[]byte)
	defer fileio.Buffers.Put(bp)
	buf := (*bp)[:scanBytes]
	for off < ls.st.Size {
		if err := ls.ctx.Err(); err != nil {
			return 0, false, err
		}
		k, err := ls.f.ReadAt(buf, off)
		if k == 0 && err != nil {
			if err == io.EOF {
				break
			}
			return 0, false, err
		}
		chunk := buf[:k]
		for {
			j := bytes.IndexByte(chunk, '\n')
			if j < 0 {
				break
			}
			seen++
			if seen == want {
				at := off + int64(k-len(chunk)) + int64(j) + 1
				return at, at < ls.st.Size, nil
			}
			chunk = chunk[j+1:]
		}
		off += int64(k)
	}
	return ls.st.Size, false, nil
}

// total returns the number of lines of the file.
func (ls *lineScan) total() (int64, error) {
	if err := ls.extend(func(int64, int64) bool { return false }); err != nil {
		return 0, err
	}
	return ls.m.lines, nil
}

// tail returns the start of the k-th line from the end (k >= 1), reading
// the file backwards in blocks from its end; a file with fewer lines
// starts at 0.
func (ls *lineScan) tail(k int64) (int64, error) {
	end := ls.st.Size
	bp := fileio.Buffers.Get().(*[]byte)
	defer fileio.Buffers.Put(bp)
	buf := (*bp)[:scanBytes]
	first := true
	var seen int64
	for end > 0 {
		if err := ls.ctx.Err(); err != nil {
			return 0, err
		}
		from := max(end-scanBytes, 0)
		n, err := ls.f.ReadAt(buf[:end-from], from)
		if n < int(end-from) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		chunk := buf[:n]
		if first {
			// The final '\n' ends the last line; it does not start one.
			first = false
			if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
				chunk = chunk[:len(chunk)-1]
			}
		}
		for {
			j := bytes.LastIndexByte(chunk, '\n')
			if j < 0 {
				break
			}
			seen++
			if seen == k {
				return from + int64(j) + 1, nil
			}
			chunk = chunk[:j]
		}
		end = from
	}
	return 0, nil
}

// lineAt returns the line number of the line starting at off: one more
// than the '\n' before it.
func (ls *lineScan) lineAt(off int64) (int64, error) {
	if err := ls.extend(func(o, _ int64) bool { return o+ls.m.stride > off }); err != nil {
		return 0, err
	}
	m := ls.m
	i := min(int(off/m.stride), len(m.nl)-1)
	from, seen := int64(i)*m.stride, m.nl[i]
	bp := fileio.Buffers.Get().(*[]byte)
	defer fileio.Buffers.Put(bp)
	buf := (*bp)[:scanBytes]
	for from < off {
		if err := ls.ctx.Err(); err != nil {
			return 0, err
		}
		n, err := ls.f.ReadAt(buf[:min(int64(len(buf)), off-from)], from)
		seen += int64(bytes.Count(buf[:n], []byte{'\n'}))
		from += int64(n)
		if n == 0 && err != nil {
			return 0, err
		}
	}
	return seen + 1, nil
}

// Length returns the length of the line starting at off.
func Length(ctx context.Context, f *os.File, off, size int64) (int64, error) {
	bp := fileio.Buffers.Get().(*[]byte)
	defer fileio.Buffers.Put(bp)
	buf := (*bp)[:scanBytes]
	for at := off; at < size; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, err := f.ReadAt(buf, at)
		if j := bytes.IndexByte(buf[:n], '\n'); j >= 0 {
			return at + int64(j) + 1 - off, nil
		}
		at += int64(n)
		if n == 0 && err != nil {
			break
		}
	}
	return size - off, nil
}
