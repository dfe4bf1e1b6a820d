package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// readRows are the rows of the reading tools.
func readRows(o options, tmp string) ([]row, error) {
	rows, err := lineRows(o, tmp)
	if err != nil {
		return nil, err
	}
	more, err := treeRows(o)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)
	more, err = readManyRows(o, tmp)
	return append(rows, more...), err
}

// readManyRows measures fs_read_many of 20 files of 4 KiB against 20
// fs_read calls one after the other, in one session, interleaved.
func readManyRows(o options, tmp string) ([]row, error) {
	dir := filepath.Join(tmp, "many")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []any
	for i := range 20 {
		name := fmt.Sprintf("f%02d.txt", i)
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte{'a' + byte(i)}, 4096), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, name)
	}
	s, err := startStdio(o.bin, dir, "--max-response-bytes", "262144")
	if err != nil {
		return nil, err
	}
	defer s.cs.Close()
	many := func() error {
		doc, err := s.call("fs_read_many", map[string]any{"paths": paths})
		if err == nil && doc["complete"] != float64(20) {
			err = fmt.Errorf("fs_read_many: %v of 20 whole", doc["complete"])
		}
		return err
	}
	seq := func() error {
		for _, p := range paths {
			if _, err := s.call("fs_read", map[string]any{"path": p}); err != nil {
				return err
			}
		}
		return nil
	}
	var lat, blat []float64
	for range max(o.samples/3, 3) {
		l, err := sample(1, many)
		if err != nil {
			return nil, err
		}
		b, err := sample(1, seq)
		if err != nil {
			return nil, err
		}
		lat, blat = append(lat, l...), append(blat, b...)
	}
	slices.Sort(lat)
	slices.Sort(blat)
	return []row{latencyRow("fs_read_many 20 × 4 KiB", lat, "20 sequential fs_read", blat, "", nil)}, nil
}

// treeRows measures fs_tree of the Go source tree against rg --files, and
// fs_grep output files against rg --files-with-matches, of the same tree,
// interleaved so that drift on a shared machine hits both alike.
func treeRows(o options) ([]row, error) {
	s, err := startStdio(o.bin, o.gotree, "--read-only")
	if err != nil {
		return nil, err
	}
	defer s.cs.Close()
	n := max(o.samples/15, 3)
	rg := func(args ...string) func() error {
		return func() error {
			cmd := exec.Command("rg", args...)
			cmd.Dir = o.gotree
			cmd.Stdout = io.Discard
			return cmd.Run()
		}
	}
	var rows []row
	for _, c := range []struct {
		name, tool string
		args       map[string]any
		baseline   string
		base       func() error
		limit      float64
	}{
		{"fs_tree depth 3 (Go tree)", "fs_tree", map[string]any{"path": "", "max_depth": 3}, "rg --files", rg("--files"), 1.3},
		{"fs_tree depth 16 (Go tree)", "fs_tree", map[string]any{"path": "", "max_depth": 16}, "rg --files", rg("--files"), 1.3},
		{"fs_grep output files 'func Benchmark' (Go tree)", "fs_grep", map[string]any{"path": "", "pattern": "func Benchmark", "output": "files"},
			"rg --files-with-matches", rg("--files-with-matches", "func Benchmark"), 1.25},
	} {
		tree := func() error { _, err := s.call(c.tool, c.args); return err }
		if err := tree(); err != nil {
			return nil, err
		}
		var lat, blat []float64
		for range n {
			l, err := sample(1, tree)
			if err != nil {
				return nil, err
			}
			b, err := sample(1, c.base)
			if err != nil {
				return nil, err
			}
			lat, blat = append(lat, l...), append(blat, b...)
		}
		slices.Sort(lat)
		slices.Sort(blat)
		rows = append(rows, latencyRow(c.name, lat, c.baseline, blat, fmt.Sprintf("≤ %.2fx", c.limit), ratioAtMost(c.limit)))
	}
	return rows, nil
}

// lineRows measures fs_read by line on a large text file: the first call
// on a version (which counts lines up to the one asked) against an
// os.Root read of the same range plus one sequential scan of the file, and
// later calls (an index hit) against fs_read of the same bytes by offset.
func lineRows(o options, tmp string) ([]row, error) {
	dir := filepath.Join(tmp, "lines")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	size := 100 << 20
	n := max(o.samples/30, 5)
	if o.smoke {
		size, n = 4<<20, 2
	}
	// Lines of 20 to 120 bytes.
	var b bytes.Buffer
	b.Grow(size + 200)
	lines := 0
	for b.Len() < size {
		lines++
		fmt.Fprintf(&b, "%08d %s\n", lines, bytes.Repeat([]byte{'a' + byte(lines%26)}, 10+lines*7919%100))
	}
	p := filepath.Join(dir, "text")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	b = bytes.Buffer{}
	s, err := startStdio(o.bin, dir)
	if err != nil {
		return nil, err
	}
	defer s.cs.Close()
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// A change of ctime makes a new version whose count is not kept for
	// a second (the index waits for a version to settle): every call
	// within that second is a first call.
	fresh := func() error { now := time.Now(); return os.Chtimes(p, now, now) }
	byteRead := func(off, length int64) error {
		f, err := r.Open("text")
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.ReadAt(make([]byte, length), off)
		if err == io.EOF {
			err = nil
		}
		return err
	}
	scan := func() error {
		f, err := r.Open("text")
		if err != nil {
			return err
		}
		defer f.Close()
		buf := make([]byte, 256<<10)
		for {
			k, err := f.Read(buf)
			bytes.Count(buf[:k], []byte{'\n'})
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	var rows []row
	for _, c := range []struct {
		name string
		line int
	}{{"10%", lines / 10}, {"50%", lines / 2}, {"90%", lines * 9 / 10}, {"-1", -1}} {
		args := map[string]any{"path": "text", "line": c.line}
		var off, length int64
		var first, base []float64
		for range n {
			if err := fresh(); err != nil {
				return nil, err
			}
			l, err := sample(1, func() error {
				doc, err := s.call("fs_read", args)
				if err == nil {
					off, length = int64(doc["offset"].(float64)), int64(doc["length"].(float64))
				}
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("fs_read line %d: %w", c.line, err)
			}
			bl, err := sample(1, func() error {
				if err := byteRead(off, length); err != nil {
					return err
				}
				return scan()
			})
			if err != nil {
				return nil, err
			}
			first, base = append(first, l...), append(base, bl...)
		}
		slices.Sort(first)
		slices.Sort(base)
		rows = append(rows, latencyRow("fs_read line "+c.name+" of 100 MiB, first call", first,
			"os.Root read + one scan", base, "≤ 1.50x", ratioAtMost(1.5)))

		// Settle, count once, then the index answers.
		time.Sleep(1100 * time.Millisecond)
		if _, err := s.call("fs_read", args); err != nil {
			return nil, err
		}
		byOffset := map[string]any{"path": "text", "offset": off, "length": length}
		var hit, bhit []float64
		for range n * 4 {
			l, err := sample(1, func() error { _, err := s.call("fs_read", args); return err })
			if err != nil {
				return nil, err
			}
			bl, err := sample(1, func() error { _, err := s.call("fs_read", byOffset); return err })
			if err != nil {
				return nil, err
			}
			hit, bhit = append(hit, l...), append(bhit, bl...)
		}
		slices.Sort(hit)
		slices.Sort(bhit)
		rows = append(rows, latencyRow("fs_read line "+c.name+" of 100 MiB, later call", hit,
			"fs_read by offset", bhit, "≤ 1.20x", ratioAtMost(1.2)))
	}
	return rows, nil
}
