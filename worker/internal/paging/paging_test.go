package paging

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"

	"github.com/fsmcp/fsmcp/worker/internal/rgjson"
)

// trimDot names rg's paths as a search of the root does.
func trimDot(p []byte) ([]byte, bool) { return bytes.TrimPrefix(p, []byte("./")), true }

// feedLines gives page the lines of files the way rg reports them: each
// file's lines in order between its begin and end, files in any order.
func feedLines(page *Lines, files map[string][]int64, order []string) {
	for _, name := range order {
		rgPath := []byte("./" + name)
		page.Block(rgPath)
		for i, off := range files[name] {
			ev := rgjson.Event{Type: rgjson.Match, Path: rgPath, HasPath: true, LineNumber: int64(i + 1), Offset: off,
				Text: bytes.Repeat([]byte("x"), int(off%50)), TextLen: off % 50}
			page.Line(&ev)
		}
		page.End(rgPath)
	}
	page.CloseAll()
}

// The line page, followed by its cursor, yields every line exactly once,
// sorted by path and offset, however rg orders the files and whatever the
// budget; no page holds much more than its budget.
func TestLinePageWalksAllLines(t *testing.T) {
	rnd := rand.New(rand.NewSource(3))
	for trial := range 200 {
		files := map[string][]int64{}
		type pos struct {
			path string
			off  int64
		}
		var want []pos
		for f := range 1 + rnd.Intn(12) {
			name := fmt.Sprintf("d%d/f%02d", rnd.Intn(3), f)
			var off int64
			for range rnd.Intn(40) {
				off += 1 + rnd.Int63n(100)
				files[name] = append(files[name], off)
				want = append(want, pos{name, off})
			}
		}
		sort.Slice(want, func(i, j int) bool {
			if want[i].path != want[j].path {
				return want[i].path < want[j].path
			}
			return want[i].off < want[j].off
		})
		budget := int64(100 + rnd.Intn(3000))
		var got []pos
		var after []byte
		var afterOff int64
		hasAfter := false
		for pages := 0; ; pages++ {
			if pages > 10000 {
				t.Fatalf("trial %d: no progress", trial)
			}
			order := make([]string, 0, len(files))
			for name := range files {
				order = append(order, name)
			}
			sort.Strings(order)
			rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			page := NewLines(after, afterOff, hasAfter, budget, trimDot)
			feedLines(page, files, order)
			lines, more := page.Result()
			var cost int64
			for _, l := range lines {
				got = append(got, pos{string(l.Path), l.Offset})
				cost += lineCost(l)
			}
			if len(lines) > 1 && cost-lineCost(lines[len(lines)-1]) >= budget {
				t.Fatalf("trial %d: page of cost %d for budget %d", trial, cost, budget)
			}
			if !more {
				break
			}
			if len(lines) == 0 {
				t.Fatalf("trial %d: an empty page with more to come", trial)
			}
			last := lines[len(lines)-1]
			after, afterOff, hasAfter = last.Path, last.Offset, true
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (budget %d): walked %d lines, want %d\n got %v\nwant %v", trial, budget, len(got), len(want), got, want)
		}
	}
}

// The path page, followed by its cursor, yields every path once, sorted.
func TestPathPageWalksAllPaths(t *testing.T) {
	rnd := rand.New(rand.NewSource(4))
	for trial := range 200 {
		var all []string
		for i := range rnd.Intn(300) {
			all = append(all, fmt.Sprintf("d%d/%s%d", rnd.Intn(5), string(rune('a'+rnd.Intn(26))), i))
		}
		want := slices.Clone(all)
		sort.Strings(want)
		budget := int64(20 + rnd.Intn(2000))
		var got []string
		var after []byte
		hasAfter := false
		for pages := 0; ; pages++ {
			if pages > 10000 {
				t.Fatalf("trial %d: no progress", trial)
			}
			rnd.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			page := NewPaths(after, hasAfter, budget)
			for _, p := range all {
				page.Add([]byte(p))
			}
			paths, more := page.Result()
			for _, p := range paths {
				got = append(got, string(p))
			}
			if !more {
				break
			}
			after, hasAfter = paths[len(paths)-1], true
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (budget %d): walked %d paths, want %d", trial, budget, len(got), len(want))
		}
	}
}
