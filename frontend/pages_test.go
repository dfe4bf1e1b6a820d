package frontend

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

// TestPageHoldsItsCursor: every paged tool keeps room for the cursor that
// continues after its last item. Names from 40 to 250 bytes make the
// cursor long, and 4 KiB pages end after each length of name: a page
// that filled up to its tail without that room would be refused as too
// large. Walking every page must give every item once.
func TestPageHoldsItsCursor(t *testing.T) {
	root := t.TempDir()
	var names []string
	for i := range 240 {
		name := fmt.Sprintf("%03d-%s", i, strings.Repeat("n", 36+(i*37)%211))
		names = append(names, name)
		fronttest.WriteFile(t, filepath.Join(root, name), []byte(strings.Repeat("match\n", 1+i%5)), 0o644)
	}
	slices.Sort(names)
	const max = 4096
	h := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	for _, c := range []struct {
		tool, list, key string
		args            map[string]any
	}{
		{"fs_list", "entries", "name", map[string]any{}},
		{"fs_list", "entries", "name", map[string]any{"sort": "size"}},
		{"fs_list", "entries", "name", map[string]any{"sort": "mtime"}},
		{"fs_glob", "files", "path", map[string]any{"pattern": "*"}},
		{"fs_glob", "files", "path", map[string]any{"pattern": "*", "sort": "mtime"}},
		{"fs_tree", "entries", "path", map[string]any{}},
		{"fs_grep", "files", "path", map[string]any{"pattern": "match", "output": "files"}},
		{"fs_grep", "files", "path", map[string]any{"pattern": "match", "output": "count"}},
		{"fs_grep", "results", "path", map[string]any{"pattern": "match"}},
	} {
		seen := map[string]int{}
		args := maps.Clone(c.args)
		pages := 0
		for ; ; pages++ {
			if pages > 1000 {
				t.Fatalf("%s %v: too many pages", c.tool, c.args)
			}
			r := h.wantOK(c.tool, args)
			if len(r.Text) > max {
				t.Fatalf("%s %v: a page of %d bytes", c.tool, c.args, len(r.Text))
			}
			for _, it := range r.Doc[c.list].([]any) {
				seen[it.(map[string]any)[c.key].(string)]++
			}
			if r.Doc["truncated"] != true {
				break
			}
			args["cursor"] = r.Str("cursor")
		}
		if pages < 10 {
			t.Errorf("%s %v: %d pages; the test wants many", c.tool, c.args, pages)
		}
		got := slices.Sorted(maps.Keys(seen))
		if !slices.Equal(got, names) {
			t.Errorf("%s %v: %d items over %d pages, want the %d names", c.tool, c.args, len(got), pages+1, len(names))
		}
		if c.list != "results" {
			for n, k := range seen {
				if k != 1 {
					t.Errorf("%s %v: %s on %d pages", c.tool, c.args, n, k)
				}
			}
		}
	}
}
