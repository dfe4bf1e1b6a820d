package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// firstResults is what max_results n keeps of rg's sorted lines: every
// line up to the n-th match, then that match's after-context lines.
func firstResults(lines []grepLine, n int, after int64) []grepLine {
	var out []grepLine
	var last *grepLine
	for i, l := range lines {
		if n == 0 {
			if l.Typ != "context" || last == nil || l.Path != last.Path || l.LineNumber > last.LineNumber+after {
				break
			}
		}
		out = append(out, l)
		if l.Typ == "match" {
			n--
			last = &lines[i]
		}
	}
	return out
}

// fs_grep's max_results bounds the results of the whole search, however
// many pages it takes: the pages, followed by cursor, hold exactly rg's
// first max_results matching lines (in path and offset order, with their
// context), and the last says max_results_reached instead of giving a
// cursor. A bound above the total changes nothing. With output files it
// bounds the files listed.
func TestContactGrepMaxResults(t *testing.T) {
	root := t.TempDir()
	for f := range 60 {
		var b strings.Builder
		for i := range 30 {
			if i%4 == 1 {
				fmt.Fprintf(&b, "needle %d in file %d\n", i, f)
			} else {
				fmt.Fprintf(&b, "hay %d\n", i)
			}
		}
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%02d.txt", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const max = 4096
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	all, _ := rgGrep(t, root, "", "--context=1", "--regexp=needle", ".")
	const total = 60 * 8
	for _, n := range []int{1, 7, 8, 100, total - 1, total, total + 1, 10000} {
		args := map[string]any{"path": "", "pattern": "needle", "context": 1, "max_results": n}
		got, last, pages := grepAll(t, s, args, max)
		want := firstResults(all, n, 1)
		compareLines(t, fmt.Sprintf("max_results %d", n), got, want)
		matches := 0
		for _, l := range got {
			if l.Typ == "match" {
				matches++
			}
		}
		reached := n < total
		if matches != min(n, total) || (last.doc["max_results_reached"] == true) != reached || last.doc["cursor"] != nil ||
			last.num("matches") != total {
			t.Errorf("max_results %d: %d matching lines in %d pages, last page %.300s; want %d, max_results_reached %v",
				n, matches, pages, last.text, min(n, total), reached)
		}
		if n == 100 && pages < 3 {
			t.Errorf("max_results 100 took %d pages: the cursor was not exercised", pages)
		}
	}

	// Files: the first max_results files with a match, over pages.
	var files []string
	for _, l := range all {
		if len(files) == 0 || files[len(files)-1] != l.Path {
			files = append(files, l.Path)
		}
	}
	for _, n := range []int{3, 45, 60, 61} {
		args := map[string]any{"path": "", "pattern": "needle", "output": "files", "max_results": n}
		var got []string
		var r reply
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("too many pages")
			}
			if r = s.wantOK("fs_grep", args); len(r.text) > max {
				t.Fatalf("reply of %d bytes exceeds %d", len(r.text), max)
			}
			for _, f := range r.doc["files"].([]any) {
				got = append(got, f.(map[string]any)["path"].(string))
			}
			if r.doc["truncated"] != true {
				break
			}
			args["cursor"] = r.str("cursor")
		}
		if want := files[:min(n, 60)]; strings.Join(got, " ") != strings.Join(want, " ") ||
			(r.doc["max_results_reached"] == true) != (n < 60) {
			t.Errorf("output files, max_results %d: %v (last page %.200s), want %v", n, got, r.text, want)
		}
	}

	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "needle", "max_results": 0}, "invalid_argument")
	r := s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "needle", "output": "count", "max_results": 5}, "invalid_argument")
	if !strings.Contains(r.text, "max_results applies to output matches and files") {
		t.Errorf("max_results with output count: %s", r.text)
	}
}
