package frontend

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
)

// cursorFor encodes a continuation point; the client treats it as opaque.
func cursorFor(after []byte) string { return base64.RawURLEncoding.EncodeToString(after) }

func parseCursor(c *string) ([]byte, bool, error) {
	if c == nil {
		return nil, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(*c)
	if err != nil || len(b) == 0 {
		return nil, false, invalidf("cursor: not a cursor this server issued")
	}
	return b, true, nil
}

// cursorLen is the length of a cursor of n bytes.
func cursorLen(n int) int { return base64.RawURLEncoding.EncodedLen(n) }

// pageTail is the most a truncated page adds after its last item, besides
// the cursor itself.
const pageTail = len(`],"truncated":true,"cursor":""}`)

// A page is a reply that lists items and, when more remain, ends with a
// cursor that continues after its last item. fs_list, fs_glob, fs_tree
// and fs_grep place an item only if the cursor continuing after it would
// still fit: a page that took its last item without that room could not
// say where to go on, and would be refused as too large.
//
// pageRoom is how many bytes the next item, its comma included, may take
// in doc, a page bounded by max: what is left once tail (what the reply
// adds after its items, pageTail included) and cursor (the length of the
// cursor continuing after that item) are set aside.
func pageRoom(doc *obj, max, tail, cursor int) int {
	return max - len(doc.b) - doc.runSize - tail - cursor
}

// fs_list's cursors. A listing by name continues after the last name
// returned: its cursor is that name. One sorted by size or mtime continues
// after the last (number, name) in its order: its cursor is a NUL, the
// sort's letter, the number as a varint, then the name. A name holds no
// NUL, so neither kind passes for the other, and a cursor is refused by a
// listing of another order.
const (
	listCursorSize  = 's'
	listCursorMtime = 'm'
)

// listSorts maps the sort argument to the worker's order and the cursor's
// letter (0 for name order).
var listSorts = map[string]struct {
	order  fsmcpv1.ListingSort
	letter byte
}{
	"name":  {fsmcpv1.ListingSort_LISTING_SORT_PATH, 0},
	"size":  {fsmcpv1.ListingSort_LISTING_SORT_SIZE, listCursorSize},
	"mtime": {fsmcpv1.ListingSort_LISTING_SORT_MTIME, listCursorMtime},
}

func listCursor(letter byte, key int64, name []byte) string {
	if letter == 0 {
		return cursorFor(name)
	}
	return cursorFor(append(binary.AppendVarint([]byte{0, letter}, key), name...))
}

// parseListCursor decodes c for a listing whose cursor letter is letter,
// into the request.
func parseListCursor(c *string, letter byte, req *fsmcpv1.ListRequest) error {
	b, ok, err := parseCursor(c)
	if err != nil || !ok {
		return err
	}
	var cursorLetter byte
	if b[0] == 0 {
		if len(b) < 2 {
			return invalidf("cursor: not a cursor this server issued")
		}
		cursorLetter = b[1]
		key, n := binary.Varint(b[2:])
		if n <= 0 || (cursorLetter != listCursorSize && cursorLetter != listCursorMtime) ||
			(cursorLetter == listCursorSize && key < 0) {
			return invalidf("cursor: not a cursor this server issued")
		}
		req.AfterKey, b = key, b[2+n:]
	}
	if len(b) == 0 || bytes.IndexByte(b, 0) >= 0 || bytes.IndexByte(b, '/') >= 0 {
		return invalidf("cursor: not a cursor this server issued")
	}
	if cursorLetter != letter {
		return invalidf("cursor: it continues a listing sorted by %s; pass that sort, or no cursor", listSortName(cursorLetter))
	}
	req.After, req.HasAfter = b, true
	return nil
}

// keyCursor encodes the position after an entry of a listing sorted by a
// number (mtime, size): the number, then the path or name.
func keyCursor(key int64, path []byte) string {
	return cursorFor(append(binary.AppendVarint(nil, key), path...))
}

func parseKeyCursor(c *string) (path []byte, key int64, ok bool, err error) {
	b, ok, err := parseCursor(c)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	key, n := binary.Varint(b)
	if n <= 0 {
		return nil, 0, false, invalidf("cursor: not a cursor this server issued")
	}
	return b[n:], key, true, nil
}

// grepCursor encodes the position after a line: its offset, then its
// path. A search bounded by max_results (bound) starts with how many
// results the pages so far returned, so that the next page returns no
// more than the bound leaves.
func grepCursor(path []byte, offset int64, bound *resultBound) string {
	var b []byte
	if bound != nil {
		b = binary.AppendUvarint(b, uint64(bound.returned))
	}
	b = binary.AppendUvarint(b, uint64(offset))
	return cursorFor(append(b, path...))
}

// parseGrepCursor reads a cursor grepCursor made, with the count of
// results returned so far when bounded.
func parseGrepCursor(c *string, bounded bool) (path []byte, offset, returned int64, ok bool, err error) {
	b, ok, err := parseCursor(c)
	if err != nil || !ok {
		return nil, 0, 0, false, err
	}
	notOurs := invalidf("cursor: not a cursor this server issued for these arguments")
	if bounded {
		r, n := binary.Uvarint(b)
		if n <= 0 || r > 1<<62 {
			return nil, 0, 0, false, notOurs
		}
		returned, b = int64(r), b[n:]
	}
	off, n := binary.Uvarint(b)
	if n <= 0 || n == len(b) || off > 1<<62 {
		return nil, 0, 0, false, notOurs
	}
	return b[n:], int64(off), returned, true, nil
}

// pageObj returns an empty document with room for a page of up to max
// bytes, so that building it does not copy it over and over.
func pageObj(max int) *obj {
	return &obj{b: append(make([]byte, 0, min(max, 1<<20)+64), '{')}
}

// reset empties o for reuse.
func (o *obj) reset() {
	o.b = append(o.b[:0], '{')
	o.n = 0
}

// resultBound is fs_grep's max_results on one page: the bound of the
// whole search, and how many results the pages before returned.
type resultBound struct {
	max, returned int64
}

// left is how many results this page may still return.
func (b *resultBound) left() int64 {
	if b == nil {
		return math.MaxInt64
	}
	return max(b.max-b.returned, 0)
}

// fitContent returns how many leading bytes of data fit in avail bytes of
// encoded JSON string content, their encoded length, and the encoding
// judged on exactly those bytes: utf8 if valid UTF-8, else base64. A UTF-8
// range is cut only at a rune boundary, so the shortened range stays valid.
func fitContent(data []byte, avail int) (n, encoded int, encoding string) {
	if avail < 0 {
		avail = 0
	}
	if !utf8.Valid(data) {
		n := min(len(data), avail/4*3)
		if !utf8.Valid(data[:n]) {
			return n, base64.StdEncoding.EncodedLen(n), "base64"
		}
		data = data[:n]
	}
	// data is valid UTF-8: a multi-byte rune costs its bytes, an ASCII
	// byte its escape. Past the budget, the cut backs up to the start of
	// the rune that did not fit.
	used := 0
	for i := 0; i < len(data); i++ {
		// A word of bytes that need no escape costs its length.
		for i+8 <= len(data) && used+8 <= avail && jsontext.PlainWord(jsontext.Load64(data, i)) {
			i, used = i+8, used+8
		}
		if i == len(data) {
			break
		}
		c := data[i]
		cost := escapedLen(c)
		if used+cost > avail {
			for i > 0 && !utf8.RuneStart(data[i]) {
				i--
				used--
			}
			return i, used, "utf8"
		}
		used += cost
	}
	return len(data), used, "utf8"
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of data.
func trimPartialRune(data []byte) []byte {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return data[:i]
			}
			break
		}
	}
	return data
}
