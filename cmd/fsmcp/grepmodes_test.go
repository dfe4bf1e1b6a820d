package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rgCounts runs rg --count in dir and returns path → count of matching
// lines, paths with prefix.
func rgCounts(t testing.TB, dir, prefix string, args ...string) map[string]int64 {
	t.Helper()
	out := rawRG(t, dir, append([]string{"--no-config", "--count", "--with-filename", "--null", "--no-ignore-parent", "--no-ignore-global"}, args...)...)
	counts := map[string]int64{}
	for len(out) > 0 {
		i := bytes.IndexByte(out, 0)
		j := bytes.IndexByte(out, '\n')
		p := strings.TrimPrefix(string(out[:i]), "./")
		if prefix != "" {
			p = prefix + "/" + p
		}
		n, err := strconv.ParseInt(string(out[i+1:j]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		counts[p] = n
		out = out[j+1:]
	}
	return counts
}

// grepFilesAll follows the cursor of a search by file to its end.
func grepFilesAll(t testing.TB, s *server, args map[string]any, field string, max int) ([]string, map[string]int64, reply, int) {
	t.Helper()
	args = maps(args)
	var order []string
	counts := map[string]int64{}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("too many pages")
		}
		r := s.wantOK("fs_grep", args)
		if len(r.text) > max {
			t.Fatalf("reply of %d bytes exceeds %d", len(r.text), max)
		}
		for _, f := range r.doc["files"].([]any) {
			m := f.(map[string]any)
			p := b64(t, m, "path")
			if _, dup := counts[p]; dup {
				t.Fatalf("%s listed twice", p)
			}
			order = append(order, p)
			counts[p] = int64(m[field].(float64))
		}
		if r.doc["truncated"] != true {
			return order, counts, r, pages + 1
		}
		args["cursor"] = r.str("cursor")
	}
}

// fs_grep output files and count list what rg --count lists, sorted by
// path, paged under a 4 KiB bound, with totals over every file.
func TestGrepModesFilesAndCount(t *testing.T) {
	root := searchTree(t)
	// Enough files with matches to take several pages.
	for i := range 120 {
		name := filepath.Join(root, "many", fmt.Sprintf("file-with-a-long-name-%03d.txt", i))
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, bytes.Repeat([]byte("alpha needle\n"), i%7+1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const max = 4096
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	exclude := "--glob=!" + searchTempPrefix + "*"
	maxPages := 0
	cases := []struct {
		args map[string]any
		rg   []string
		dir  string
	}{
		{map[string]any{"path": "", "pattern": "needle|alpha"}, []string{"--regexp=needle|alpha"}, ""},
		{map[string]any{"path": "", "pattern": "needle", "hidden": true, "no_ignore": true}, []string{"--hidden", "--no-ignore", "--regexp=needle"}, ""},
		{map[string]any{"path": "", "pattern": "NEEDLE", "ignore_case": true, "max_count": 1}, []string{"--ignore-case", "--max-count=1", "--regexp=NEEDLE"}, ""},
		{map[string]any{"path": "", "pattern": "alpha", "type": "go"}, []string{"--type=go", "--regexp=alpha"}, ""},
		{map[string]any{"pattern": "needle", "path": "long.txt"}, []string{"--regexp=needle"}, "long.txt"},
		{map[string]any{"pattern": "beta", "path": "d1"}, []string{"--regexp=beta"}, "d1"},
	}
	for _, c := range cases {
		dir, prefix := filepath.Join(root, c.dir), c.dir
		target := "."
		if c.dir == "long.txt" {
			dir, target = root, "long.txt"
			prefix = ""
		}
		want := rgCounts(t, dir, prefix, append(c.rg, exclude, "--", target)...)
		if len(want) == 0 {
			t.Fatalf("%v: rg finds nothing", c.args)
		}
		var total int64
		var wantOrder []string
		for p, n := range want {
			total += n
			wantOrder = append(wantOrder, p)
		}
		sort.Strings(wantOrder)
		for _, mode := range []string{"files", "count"} {
			args := maps(c.args)
			args["output"] = mode
			field := map[string]string{"files": "matches", "count": "count"}[mode]
			order, got, last, pages := grepFilesAll(t, s, args, field, max)
			if pages > maxPages {
				maxPages = pages
			}
			if !slices.Equal(order, wantOrder) {
				t.Errorf("fs_grep(%v) files %q\nrg: %q", args, order, wantOrder)
			}
			for p, n := range want {
				if got[p] != n {
					t.Errorf("fs_grep(%v): %s has %d, rg counts %d", args, p, got[p], n)
				}
			}
			sum := last.num("matches")
			if mode == "count" {
				sum = last.num("count")
			}
			if sum != total || last.num("files_matched") != int64(len(want)) {
				t.Errorf("fs_grep(%v): total %d over %d files, rg %d over %d", args, sum, last.num("files_matched"), total, len(want))
			}
		}
	}
	// The temp files the tree holds never appear.
	args := map[string]any{"path": "", "pattern": "needle", "hidden": true, "no_ignore": true, "output": "files"}
	order, _, _, _ := grepFilesAll(t, s, args, "matches", max)
	if maxPages < 2 {
		t.Errorf("no search took more than one page")
	}
	for _, p := range order {
		if strings.Contains(p, searchTempPrefix) {
			t.Fatalf("a temp file: %s", p)
		}
	}
}

// Context on either side, file types and multiline search are rg's.
func TestGrepModesOptions(t *testing.T) {
	root := searchTree(t)
	if err := os.WriteFile(filepath.Join(root, "multi.txt"), []byte("one\nneedle\nhay\nhay\nstack\nlast\r\nline\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const max = 48 << 10
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	cases := []struct {
		args map[string]any
		rg   []string
	}{
		{map[string]any{"path": "", "pattern": "needle", "before": 2, "after": 1}, []string{"--before-context=2", "--after-context=1", "--regexp=needle"}},
		{map[string]any{"path": "", "pattern": "needle", "before": 1}, []string{"--before-context=1", "--regexp=needle"}},
		{map[string]any{"path": "", "pattern": "needle", "context": 3, "after": 0}, []string{"--before-context=3", "--regexp=needle"}},
		{map[string]any{"path": "", "pattern": "alpha", "type": "go"}, []string{"--type=go", "--regexp=alpha"}},
		{map[string]any{"path": "", "pattern": "needle", "type": "txt", "hidden": true}, []string{"--type=txt", "--hidden", "--regexp=needle"}},
		{map[string]any{"path": "", "pattern": "needle\\nhay\\nhay", "multiline": true}, []string{"--multiline", "--regexp=needle\\nhay\\nhay"}},
		{map[string]any{"path": "", "pattern": "last\\r\\nline", "multiline": true}, []string{"--multiline", "--regexp=last\\r\\nline"}},
	}
	for _, c := range cases {
		want, _ := rgGrep(t, root, "", append(c.rg, "--glob=!"+searchTempPrefix+"*", "--", ".")...)
		if len(want) == 0 {
			t.Fatalf("%v: rg finds nothing", c.args)
		}
		got, _, _ := grepAll(t, s, c.args, max)
		compareLines(t, fmt.Sprint(c.args), got, want)
	}
	// Without multiline, a pattern with \n is rg's own refusal.
	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "needle\\nhay"}, "invalid_argument")
	for _, bad := range []map[string]any{
		{"pattern": "x", "type": "nosuchtype"},
		{"pattern": "x", "type": "go:*.go"},
		{"pattern": "x", "type": "--pre=sh"},
		{"pattern": "x", "type": ""},
		{"pattern": "x", "output": "lines"},
		{"pattern": "x", "output": "files", "context": 1},
		{"pattern": "x", "output": "count", "after": 1},
		{"pattern": "x", "before": -1},
		{"pattern": "x", "after": 1001},
	} {
		s.wantErr("fs_grep", bad, "invalid_argument")
	}
}

// fs_glob max_depth is rg's --max-depth; sort mtime lists newest first and
// pages losslessly while files change between pages.
func TestGlobDepthAndMtime(t *testing.T) {
	root := searchTree(t)
	const max = 4096
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	for _, d := range []int{1, 2, 3} {
		want := rgFiles(t, root, "", "--max-depth="+strconv.Itoa(d), "--glob=*", "--glob=!"+searchTempPrefix+"*", "--", ".")
		got, _ := globAll(t, s, map[string]any{"path": "", "pattern": "*", "max_depth": d}, max)
		if !slices.Equal(got, want) {
			t.Errorf("max_depth %d: %q\nrg: %q", d, got, want)
		}
	}
	s.wantErr("fs_glob", map[string]any{"path": "", "pattern": "*", "max_depth": 0}, "invalid_argument")
	s.wantErr("fs_glob", map[string]any{"path": "", "pattern": "*", "sort": "size"}, "invalid_argument")

	// Distinct mtimes, a few shared, in a tree of its own.
	dir := t.TempDir()
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	var names []string
	for i := range 120 {
		name := fmt.Sprintf("f%03d-%s.txt", i, strings.Repeat("n", 40))
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i%100) * time.Hour)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	ms := start(t, dir, "--max-response-bytes", "4096")
	args := map[string]any{"path": "", "pattern": "*", "sort": "mtime"}
	var seen []string
	var lastTime string
	pages := 0
	changed := map[string]bool{}
	for ; ; pages++ {
		r := ms.wantOK("fs_glob", args)
		if len(r.text) > 4096 {
			t.Fatalf("reply of %d bytes", len(r.text))
		}
		for _, f := range r.doc["files"].([]any) {
			m := f.(map[string]any)
			p, mt := m["path"].(string), m["mtime"].(string)
			if lastTime != "" && mt > lastTime {
				t.Fatalf("%s (%s) after %s: not newest first", p, mt, lastTime)
			}
			lastTime = mt
			seen = append(seen, p)
		}
		if r.doc["truncated"] != true {
			break
		}
		args["cursor"] = r.str("cursor")
		// Between pages: one file not yet listed becomes the newest
		// (moving before the cursor), one already listed becomes the
		// oldest (moving after it), and one is removed.
		if pages < 3 {
			for _, name := range names {
				if !slices.Contains(seen, name) && !changed[name] {
					now := time.Now()
					os.Chtimes(filepath.Join(dir, name), now, now)
					changed[name] = true
					break
				}
			}
			old := seen[0]
			os.Chtimes(filepath.Join(dir, old), base.Add(-time.Hour), base.Add(-time.Hour))
			changed[old] = true
			for _, name := range names {
				if !slices.Contains(seen, name) && !changed[name] {
					os.Remove(filepath.Join(dir, name))
					changed[name] = true
					break
				}
			}
		}
	}
	if pages < 3 {
		t.Errorf("%d pages; the walk did not page", pages)
	}
	counts := map[string]int{}
	for _, p := range seen {
		counts[p]++
	}
	for _, name := range names {
		if changed[name] {
			continue
		}
		if counts[name] != 1 {
			t.Errorf("%s, unchanged, listed %d times", name, counts[name])
		}
	}
}
