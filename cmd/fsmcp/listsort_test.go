package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listSortBound is the reply bound of the paged listings below: small
// enough that a few hundred entries take many pages.
const listSortBound = 4096

// listSortEntry is one entry of a page as the test reads it.
type listSortEntry struct {
	name  string
	size  int64
	mtime time.Time
	typ   string
}

func listSortEntries(t *testing.T, r reply) []listSortEntry {
	t.Helper()
	var out []listSortEntry
	for _, e := range r.doc["entries"].([]any) {
		m := e.(map[string]any)
		mt, err := time.Parse(time.RFC3339Nano, m["mtime"].(string))
		if err != nil {
			t.Fatalf("mtime %v: %v", m["mtime"], err)
		}
		out = append(out, listSortEntry{name: m["name"].(string), size: int64(m["size"].(float64)), mtime: mt, typ: m["type"].(string)})
	}
	return out
}

// before reports whether a comes before b in the order of sort: larger
// (or newer) first, ties by name bytes.
func listSortBefore(sort string, a, b listSortEntry) bool {
	var ka, kb int64
	switch sort {
	case "size":
		ka, kb = a.size, b.size
	case "mtime":
		ka, kb = a.mtime.UnixNano(), b.mtime.UnixNano()
	}
	if ka != kb {
		return ka > kb
	}
	return a.name < b.name
}

// fs_list sorted by size and by mtime, paged under a 4 KiB bound, while
// entries are added, removed, grown and touched between pages: every
// entry left unchanged through the walk is listed exactly once, each page
// is in order, and only changed entries may be listed again or missed.
func TestListSortPagedWhileChanging(t *testing.T) {
	for _, sort := range []string{"size", "mtime"} {
		t.Run(sort, func(t *testing.T) {
			root, _ := tree(t)
			dir := filepath.Join(root, "d")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
			all := map[string]bool{}
			for i := range 300 {
				// Sizes and mtimes repeat, so that ties by name are
				// crossed by page ends.
				name := fmt.Sprintf("f%03d", (i*37)%300)
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(strings.Repeat("x", (i%23)*11)), 0o644); err != nil {
					t.Fatal(err)
				}
				mt := base.Add(time.Duration(i%17) * time.Second)
				if err := os.Chtimes(p, mt, mt); err != nil {
					t.Fatal(err)
				}
				all[name] = true
			}
			s := start(t, root, "--max-response-bytes", fmt.Sprint(listSortBound))
			changed := map[string]bool{}
			seen := map[string]int{}
			var prev *listSortEntry
			args := map[string]any{"path": "d", "sort": sort}
			pages := 0
			for ; ; pages++ {
				if pages > 200 {
					t.Fatal("too many pages")
				}
				r := s.wantOK("fs_list", args)
				if len(r.text) > listSortBound {
					t.Fatalf("reply of %d bytes exceeds %d", len(r.text), listSortBound)
				}
				page := listSortEntries(t, r)
				for i, e := range page {
					seen[e.name]++
					if i > 0 && !listSortBefore(sort, page[i-1], e) {
						t.Fatalf("page %d out of order: %v then %v", pages, page[i-1], e)
					}
					// Across pages, an entry unchanged since the cursor
					// comes after it.
					if i == 0 && prev != nil && !changed[e.name] && !listSortBefore(sort, *prev, e) {
						t.Fatalf("page %d starts with %v, not after the cursor's %v", pages, e, *prev)
					}
				}
				if r.doc["truncated"] != true {
					break
				}
				if len(page) == 0 {
					t.Fatalf("truncated page %d holds no entry: %s", pages, r.text)
				}
				last := page[len(page)-1]
				prev = &last
				args = map[string]any{"path": "d", "sort": sort, "cursor": r.str("cursor")}
				listSortChange(t, dir, pages, all, seen, changed)
			}
			if pages < 5 {
				t.Fatalf("the walk took %d pages; the test needs many", pages)
			}
			unchanged := 0
			for name := range all {
				if changed[name] {
					continue
				}
				unchanged++
				if seen[name] != 1 {
					t.Errorf("unchanged entry %s listed %d times", name, seen[name])
				}
			}
			for name, n := range seen {
				if n > 1 && !changed[name] {
					t.Errorf("entry %s listed %d times", name, n)
				}
			}
			if unchanged < 200 || len(changed) < 20 {
				t.Fatalf("%d unchanged and %d changed entries: the walk did not test both", unchanged, len(changed))
			}
			t.Logf("%d pages, %d entries unchanged, %d changed", pages, unchanged, len(changed))
		})
	}
}

// listSortChange changes the directory between pages: it grows and
// touches an entry already listed (it moves ahead of the cursor, into
// what is still to come), shrinks and backdates one not yet listed (it
// may move behind the cursor), removes one not yet listed and adds one.
// Each is marked changed.
func listSortChange(t *testing.T, dir string, page int, all map[string]bool, seen map[string]int, changed map[string]bool) {
	t.Helper()
	var listed, unlisted []string
	for name := range all {
		if changed[name] {
			continue
		}
		if seen[name] > 0 {
			listed = append(listed, name)
		} else {
			unlisted = append(unlisted, name)
		}
	}
	pick := func(names []string) string {
		if len(names) == 0 {
			return ""
		}
		// The smallest name: a deterministic choice.
		m := names[0]
		for _, n := range names {
			m = min(m, n)
		}
		return m
	}
	late := time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	early := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if n := pick(listed); n != "" {
		changed[n] = true
		if err := os.WriteFile(filepath.Join(dir, n), []byte(strings.Repeat("y", 4000+page)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, n), late, late); err != nil {
			t.Fatal(err)
		}
	}
	if n := pick(unlisted); n != "" {
		changed[n] = true
		if err := os.Truncate(filepath.Join(dir, n), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, n), early, early); err != nil {
			t.Fatal(err)
		}
		unlisted = unlisted[1:]
	}
	for _, n := range unlisted {
		if !changed[n] {
			changed[n] = true
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	added := fmt.Sprintf("new%03d", page)
	changed[added] = true
	all[added] = true
	if err := os.WriteFile(filepath.Join(dir, added), []byte(strings.Repeat("z", page*7)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fs_list's totals count the whole directory, not the page, and agree
// with a count the test makes itself and with the sum of every page.
func TestListSortTotals(t *testing.T) {
	root, _ := tree(t)
	dir := filepath.Join(root, "d")
	for _, sub := range []string{"d/s1", "d/s2", "d/s3/deeper"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 150 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%03d.txt", i)), []byte(strings.Repeat("b", i*13)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Entries of other types are files too; their sizes are what lstat
	// says, as the listing shows them.
	if err := os.Symlink("file-001.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A write's temp file is never listed, and never counted.
	if err := os.WriteFile(filepath.Join(dir, ".fsmcp-tmp-inflight"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	var files, dirs, bytes int64
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".fsmcp-tmp-") {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			dirs++
		} else {
			files++
			bytes += fi.Size()
		}
	}
	want := fmt.Sprintf("files=%d directories=%d bytes=%d", files, dirs, bytes)
	s := start(t, root, "--max-response-bytes", fmt.Sprint(listSortBound))
	for _, sort := range []string{"name", "size", "mtime"} {
		var pf, pd, pb int64
		args := map[string]any{"path": "d", "sort": sort, "totals": true}
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("too many pages")
			}
			r := s.wantOK("fs_list", args)
			if len(r.text) > listSortBound {
				t.Fatalf("reply of %d bytes exceeds %d", len(r.text), listSortBound)
			}
			tot, ok := r.doc["totals"].(map[string]any)
			if !ok {
				t.Fatalf("sort %s, page %d: no totals: %s", sort, pages, r.text)
			}
			got := fmt.Sprintf("files=%v directories=%v bytes=%v", tot["files"], tot["directories"], tot["bytes"])
			if got != want {
				t.Errorf("sort %s, page %d: totals %s, want %s", sort, pages, got, want)
			}
			for _, e := range listSortEntries(t, r) {
				if e.typ == "directory" {
					pd++
				} else {
					pf++
					pb += e.size
				}
			}
			if r.doc["truncated"] != true {
				if pages == 0 {
					t.Fatalf("sort %s: one page holds the whole directory; the test needs several", sort)
				}
				break
			}
			args = map[string]any{"path": "d", "sort": sort, "totals": true, "cursor": r.str("cursor")}
		}
		if got := fmt.Sprintf("files=%d directories=%d bytes=%d", pf, pd, pb); got != want {
			t.Errorf("sort %s: the pages add up to %s, want %s", sort, got, want)
		}
	}
	// Without totals asked, the reply has none.
	if r := s.wantOK("fs_list", map[string]any{"path": "d"}); r.doc["totals"] != nil {
		t.Errorf("fs_list without totals has totals: %s", r.text[:200])
	}
}

// A cursor continues only a listing of its own order; a cursor this
// server could not have issued is invalid_argument.
func TestListSortCursorRefusals(t *testing.T) {
	root, _ := tree(t)
	dir := filepath.Join(root, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("entry-%03d", i)), []byte(strings.Repeat("c", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, root, "--max-response-bytes", fmt.Sprint(listSortBound))
	cursors := map[string]string{}
	for _, sort := range []string{"name", "size", "mtime"} {
		r := s.wantOK("fs_list", map[string]any{"path": "d", "sort": sort})
		if r.doc["truncated"] != true {
			t.Fatalf("sort %s: one page: %s", sort, r.text)
		}
		cursors[sort] = r.str("cursor")
		// Each continues its own order.
		s.wantOK("fs_list", map[string]any{"path": "d", "sort": sort, "cursor": cursors[sort]})
	}
	// The default order is name's.
	s.wantOK("fs_list", map[string]any{"path": "d", "cursor": cursors["name"]})
	for from, c := range cursors {
		for _, sort := range []string{"name", "size", "mtime"} {
			if sort == from {
				continue
			}
			r := s.wantErr("fs_list", map[string]any{"path": "d", "sort": sort, "cursor": c}, "invalid_argument")
			if !strings.Contains(r.text, "sorted by "+from) {
				t.Errorf("cursor of sort %s with sort %s: %s, want the cursor's sort named", from, sort, r.text)
			}
		}
	}
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	key := func(letter byte, n int64, name string) string {
		return enc(append(binary.AppendVarint([]byte{0, letter}, n), name...))
	}
	garbled := map[string]map[string]any{
		"not base64":            {"path": "d", "cursor": "!!"},
		"empty":                 {"path": "d", "cursor": ""},
		"a lone NUL":            {"path": "d", "sort": "size", "cursor": enc([]byte{0})},
		"an unknown letter":     {"path": "d", "sort": "size", "cursor": key('x', 5, "entry-001")},
		"no name after the key": {"path": "d", "sort": "size", "cursor": key('s', 5, "")},
		"a negative size":       {"path": "d", "sort": "size", "cursor": key('s', -1, "entry-001")},
		"a truncated varint":    {"path": "d", "sort": "mtime", "cursor": enc([]byte{0, 'm', 0x80})},
		"a name with a slash":   {"path": "d", "cursor": enc([]byte("a/b"))},
		"a name with a NUL":     {"path": "d", "sort": "size", "cursor": key('s', 5, "a\x00b")},
		"an unknown sort":       {"path": "d", "sort": "inode"},
	}
	for what, args := range garbled {
		if r := s.call("fs_list", args); r.code() != "invalid_argument" {
			t.Errorf("cursor with %s: %s, want invalid_argument", what, r.text)
		}
	}
	// A forged but well-formed cursor is a position: the page after it.
	r := s.wantOK("fs_list", map[string]any{"path": "d", "sort": "size", "cursor": key('s', 150, "entry-150")})
	if e := listSortEntries(t, r); len(e) == 0 || e[0].name != "entry-149" {
		t.Errorf("page after (150, entry-150) starts %v, want entry-149", e[:min(len(e), 1)])
	}
}
