package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// treeFixture writes a tree with what fs_tree must judge: an empty
// directory, one whose files are all ignored, an ignored directory,
// hidden names, nesting past the default depth, symlinks to a file, to a
// directory and out of the root, a fifo, a name that is not UTF-8, temp
// files, and enough entries in one directory to take several pages.
func treeFixture(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	for _, d := range []string{"empty", "onlyignored", "ignored_dir", ".hid", "d1/d2/d3/d4", "bad\xffname", "many", "../outside"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		".ignore": "ignored_dir/\n*.log\n", "a.txt": "aaa", "onlyignored/x.log": "log", "ignored_dir/f": "f",
		".hid/h": "h", ".hfile": "hf", "d1/d2/d3/d4/deep.txt": "deep", "d1/d2/mid.txt": "mid", "bad\xffname/inner.txt": "in",
		searchTempPrefix + "123": "temp", "d1/" + searchTempPrefix + "456": "temp", "../outside/secret": "secret",
	}
	for i := range 150 {
		files[fmt.Sprintf("many/entry-with-a-rather-long-name-%03d.txt", i)] = strings.Repeat("x", i)
	}
	for name, body := range files {
		writeFile(t, filepath.Join(root, name), []byte(body), 0o644)
	}
	for name, target := range map[string]string{"link_file": "a.txt", "link_dir": "d1", "link_out": "../outside"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// treeAll follows fs_tree's cursor to the end and returns "path type
// [size] [more]" per entry.
func treeAll(t *testing.T, s *server, args map[string]any, max int) ([]string, int) {
	t.Helper()
	args = maps(args)
	var out []string
	pages := 0
	for ; ; pages++ {
		if pages > 1000 {
			t.Fatal("too many pages")
		}
		r := s.wantOK("fs_tree", args)
		if len(r.text) > max {
			t.Fatalf("reply of %d bytes exceeds %d", len(r.text), max)
		}
		for _, x := range r.doc["entries"].([]any) {
			m := x.(map[string]any)
			e := b64(t, m, "path") + " " + m["type"].(string)
			if sz, ok := m["size"].(float64); ok {
				e += " " + strconv.Itoa(int(sz))
			}
			if m["more"] == true {
				e += " more"
			}
			out = append(out, e)
		}
		if r.num("total") < int64(len(out)) {
			t.Fatalf("total %d, already %d entries", r.num("total"), len(out))
		}
		if r.doc["truncated"] != true {
			if r.num("total") != int64(len(out)) {
				t.Fatalf("total %d, listed %d", r.num("total"), len(out))
			}
			return out, pages + 1
		}
		args["cursor"] = r.str("cursor")
	}
}

func manyEntries() []string {
	var out []string
	for i := range 150 {
		out = append(out, fmt.Sprintf("many/entry-with-a-rather-long-name-%03d.txt file %d", i, i))
	}
	return out
}

func TestTreeListing(t *testing.T) {
	root := treeFixture(t)
	const max = 4096
	s := start(t, root, "--max-response-bytes", strconv.Itoa(max))
	top := []string{"a.txt file 3", "bad\xffname directory", "bad\xffname/inner.txt file 2", "d1 directory",
		"empty directory", "fifo fifo", "link_dir symlink", "link_file symlink", "link_out symlink", "many directory", "onlyignored directory"}
	sorted := func(es ...[]string) []string {
		var all []string
		for _, e := range es {
			all = append(all, e...)
		}
		sort.Strings(all)
		return all
	}
	cases := []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"path": ""}, sorted(top, manyEntries(), []string{"d1/d2 directory", "d1/d2/d3 directory more", "d1/d2/mid.txt file 3"})},
		{map[string]any{"path": "", "max_depth": 1}, sorted([]string{"a.txt file 3", "bad\xffname directory more", "d1 directory more",
			"empty directory", "fifo fifo", "link_dir symlink", "link_file symlink", "link_out symlink", "many directory more", "onlyignored directory"})},
		{map[string]any{"path": "", "max_depth": 16}, sorted(top, manyEntries(), []string{"d1/d2 directory", "d1/d2/d3 directory",
			"d1/d2/mid.txt file 3", "d1/d2/d3/d4 directory", "d1/d2/d3/d4/deep.txt file 4"})},
		{map[string]any{"path": "", "hidden": true, "max_depth": 2}, sorted(top, manyEntries(), []string{"d1/d2 directory more",
			".hfile file 2", ".hid directory", ".hid/h file 1", ".ignore file 19"})},
		{map[string]any{"path": "", "no_ignore": true, "max_depth": 2}, sorted(top, manyEntries(), []string{"d1/d2 directory more",
			"ignored_dir directory", "ignored_dir/f file 1", "onlyignored/x.log file 3"})},
		{map[string]any{"path": "d1", "max_depth": 2}, []string{"d1/d2 directory", "d1/d2/d3 directory more", "d1/d2/mid.txt file 3"}},
		{map[string]any{"path": "", "exclude": []string{"many", "*.txt"}, "max_depth": 2}, sorted([]string{"bad\xffname directory",
			"d1 directory", "d1/d2 directory more", "empty directory", "fifo fifo", "link_dir symlink", "link_file symlink", "link_out symlink",
			"onlyignored directory"})},
		// Exclusions apply after the ignore rules, with hidden and
		// no_ignore too; none re-includes a temp file.
		{map[string]any{"path": "", "hidden": true, "no_ignore": true, "max_depth": 1,
			"exclude": []string{"!" + searchTempPrefix + "*", "!**", "many", ".hid"}},
			sorted([]string{"a.txt file 3", "bad\xffname directory more", "d1 directory more", "empty directory", "fifo fifo",
				"link_dir symlink", "link_file symlink", "link_out symlink", "onlyignored directory more",
				".hfile file 2", ".ignore file 19", "ignored_dir directory more"})},
	}
	for _, c := range cases {
		got, pages := treeAll(t, s, c.args, max)
		if !slices.Equal(got, c.want) {
			t.Errorf("fs_tree(%v):\n got %q\nwant %q", c.args, got, c.want)
		}
		if _, many := c.args["exclude"]; !many && c.args["max_depth"] != 1 && c.args["path"] == "" && pages < 2 {
			t.Errorf("fs_tree(%v): %d page; the listing should not fit in one", c.args, pages)
		}
		// The files are exactly what rg --files lists at that depth
		// with those options.
		depth := 3
		if d, ok := c.args["max_depth"].(int); ok {
			depth = d
		}
		rgArgs := []string{"--max-depth=" + strconv.Itoa(depth)}
		if c.args["hidden"] == true {
			rgArgs = append(rgArgs, "--hidden")
		}
		if c.args["no_ignore"] == true {
			rgArgs = append(rgArgs, "--no-ignore")
		}
		if ex, ok := c.args["exclude"].([]string); ok {
			for _, g := range ex {
				rgArgs = append(rgArgs, "--glob=!"+g)
			}
		}
		dir := c.args["path"].(string)
		want := rgFiles(t, filepath.Join(root, dir), dir, append(rgArgs, "--glob=!"+searchTempPrefix+"*", "--", ".")...)
		var files []string
		for _, e := range got {
			if path, _, ok := strings.Cut(e, " file "); ok {
				files = append(files, path)
			}
		}
		if !slices.Equal(files, want) {
			t.Errorf("fs_tree(%v) files %.300q\nrg --files lists %.300q", c.args, files, want)
		}
	}
	for _, bad := range []map[string]any{
		{"path": "", "max_depth": 0}, {"path": "", "max_depth": 17}, {"path": "", "exclude": []string{""}},
	} {
		s.wantErr("fs_tree", bad, "invalid_argument")
	}
	s.wantErr("fs_tree", map[string]any{"path": "a.txt"}, "not_a_directory")
	s.wantErr("fs_tree", map[string]any{"path": "link_out"}, "outside_root")
	s.wantErr("fs_tree", map[string]any{"path": "../outside"}, "outside_root")
	s.wantErr("fs_tree", map[string]any{"path": "missing"}, "not_found")
	s.wantErr("fs_glob", map[string]any{"path": "", "pattern": "*", "exclude": []string{"a["}}, "invalid_argument")
	// fs_glob's exclusions cannot re-include a temp file either.
	g, _ := globAll(t, s, map[string]any{"path": "", "pattern": "**", "hidden": true, "no_ignore": true,
		"exclude": []string{"!" + searchTempPrefix + "*", "!**/" + searchTempPrefix + "*"}}, max)
	for _, p := range g {
		if strings.Contains(p, searchTempPrefix) {
			t.Fatalf("fs_glob listed a temp file: %s", p)
		}
	}
}
