package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// searchTempPrefix is the worker's prefix for the temp files of atomic writes.
const searchTempPrefix = ".fsmcp-tmp-"

// rgPath is the ripgrep the tests compare against: the one fsmcp runs.
func rgPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("rg")
	if err != nil {
		t.Fatalf("rg: %v", err)
	}
	return p
}

// rawRG runs rg itself in dir, with an empty environment, and returns its
// stdout. Exit status 1 (nothing found) is not an error.
func rawRG(t testing.TB, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(rgPath(t), args...)
	cmd.Dir = dir
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) {
		t.Fatalf("rg %q: %v\n%s", args, err, stderr.String())
	}
	return out
}

// grepLine is one fs_grep result, or one line of rg's own output.
type grepLine struct {
	Typ        string
	Path       string
	LineNumber int64
	Offset     int64
	Text       string
	LineLength int64
	Submatches [][2]int64
}

func (l grepLine) String() string {
	return fmt.Sprintf("%s %q:%d@%d %q(%d) %v", l.Typ, l.Path, l.LineNumber, l.Offset, trunc(l.Text), l.LineLength, l.Submatches)
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func sortLines(ls []grepLine) {
	sort.SliceStable(ls, func(i, j int) bool {
		if ls[i].Path != ls[j].Path {
			return ls[i].Path < ls[j].Path
		}
		return ls[i].Offset < ls[j].Offset
	})
}

// rgText decodes rg's {"text":…} or {"bytes":…}.
type rgText struct {
	Text  *string `json:"text"`
	Bytes *string `json:"bytes"`
}

func (r *rgText) bytes(t testing.TB) string {
	switch {
	case r == nil:
		return ""
	case r.Text != nil:
		return *r.Text
	}
	b, err := base64.StdEncoding.DecodeString(*r.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rgGrep runs rg --json in dir and decodes its lines with encoding/json,
// sorted; prefix is put before every path. It also returns rg's summary
// count of searches.
func rgGrep(t testing.TB, dir, prefix string, args ...string) ([]grepLine, int64) {
	t.Helper()
	out := rawRG(t, dir, append([]string{"--no-config", "--json", "--no-ignore-parent", "--no-ignore-global"}, args...)...)
	var lines []grepLine
	var searches int64
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m struct {
			Type string `json:"type"`
			Data struct {
				Path       *rgText `json:"path"`
				Lines      *rgText `json:"lines"`
				LineNumber int64   `json:"line_number"`
				Offset     int64   `json:"absolute_offset"`
				Submatches []struct {
					Start, End int64
				} `json:"submatches"`
				Stats struct {
					Searches int64 `json:"searches"`
				} `json:"stats"`
			} `json:"data"`
		}
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case "summary":
			searches = m.Data.Stats.Searches
			continue
		case "match", "context":
		default:
			continue
		}
		p := strings.TrimPrefix(m.Data.Path.bytes(t), "./")
		if prefix != "" {
			p = prefix + "/" + p
		}
		text := m.Data.Lines.bytes(t)
		l := grepLine{Typ: m.Type, Path: p, LineNumber: m.Data.LineNumber, Offset: m.Data.Offset, Text: text, LineLength: int64(len(text))}
		for _, sm := range m.Data.Submatches {
			l.Submatches = append(l.Submatches, [2]int64{sm.Start, sm.End})
		}
		lines = append(lines, l)
	}
	sortLines(lines)
	return lines, searches
}

// b64 returns the field k of m, or its k_base64 twin decoded.
func b64(t testing.TB, m map[string]any, k string) string {
	t.Helper()
	if s, ok := m[k].(string); ok {
		if _, both := m[k+"_base64"]; both {
			t.Fatalf("both %s and %s_base64 in %v", k, k, m)
		}
		return s
	}
	s, ok := m[k+"_base64"].(string)
	if !ok {
		t.Fatalf("no %s in %v", k, m)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	if utf8.Valid(b) {
		t.Fatalf("%s_base64 holds valid UTF-8 %q", k, b)
	}
	return string(b)
}

// grepPage decodes the results of one fs_grep reply.
func grepPage(t testing.TB, r reply) []grepLine {
	t.Helper()
	var out []grepLine
	for _, x := range r.doc["results"].([]any) {
		m := x.(map[string]any)
		l := grepLine{Typ: m["type"].(string), Path: b64(t, m, "path"), LineNumber: int64(m["line_number"].(float64)),
			Offset: int64(m["offset"].(float64)), Text: b64(t, m, "text")}
		l.LineLength = int64(len(l.Text))
		if m["text_truncated"] == true {
			l.LineLength = int64(m["line_length"].(float64))
		}
		for _, sm := range m["submatches"].([]any) {
			sm := sm.(map[string]any)
			l.Submatches = append(l.Submatches, [2]int64{int64(sm["start"].(float64)), int64(sm["end"].(float64))})
		}
		out = append(out, l)
	}
	return out
}

// grepAll follows the cursor from the first page to the last, checking
// every reply's size and that the totals agree across pages.
func grepAll(t testing.TB, s *server, args map[string]any, max int) (lines []grepLine, last reply, pages int) {
	t.Helper()
	args = maps(args)
	var matches float64 = -1
	for {
		if pages++; pages > 10000 {
			t.Fatal("too many pages")
		}
		r := s.wantOK("fs_grep", args)
		if len(r.text) > max {
			t.Fatalf("reply of %d bytes exceeds --max-response-bytes %d", len(r.text), max)
		}
		if m := r.doc["matches"].(float64); matches >= 0 && m != matches {
			t.Fatalf("matches total changed between pages: %v then %v", matches, m)
		} else {
			matches = m
		}
		lines = append(lines, grepPage(t, r)...)
		if r.doc["truncated"] != true {
			return lines, r, pages
		}
		args["cursor"] = r.str("cursor")
	}
}

func maps(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// compareLines fails unless got equals want, allowing a line that the
// reply cut to be a prefix of rg's whole line of the right length.
func compareLines(t testing.TB, what string, got, want []grepLine) {
	t.Helper()
	n := max(len(got), len(want))
	for i := range n {
		if i >= len(got) || i >= len(want) {
			t.Fatalf("%s: %d results, rg has %d; first extra: %v", what, len(got), len(want), append(got[min(i, len(got)):], want[min(i, len(want)):]...)[0])
		}
		g, w := got[i], want[i]
		if g.LineLength > int64(len(g.Text)) && strings.HasPrefix(w.Text, g.Text) && len(g.Text) > 0 {
			g.Text = w.Text
		}
		if g.String() != w.String() || g.Text != w.Text {
			t.Fatalf("%s: result %d\n got %v\nwant %v", what, i, g, w)
		}
	}
}

// searchTree writes a tree with the content that needs care: invalid
// UTF-8, CRLF, a very long line, binary files, names that are not UTF-8,
// hidden and ignored files, a symlinked directory, and a temp file of an
// atomic write.
func searchTree(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	rnd := rand.New(rand.NewSource(1))
	words := []string{"alpha", "needle", "Needle", "NEEDLE", "ne.dle", "beta", "héllo", "wörld", "\xff\xfe", "\xc3", "\t", "x"}
	write := func(name string, content []byte) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(lines int, eol string) []byte {
		var b bytes.Buffer
		for range lines {
			for w := range 1 + rnd.Intn(8) {
				if w > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(words[rnd.Intn(len(words))])
			}
			b.WriteString(eol)
		}
		return b.Bytes()
	}
	for i := range 30 {
		eol := "\n"
		if i%3 == 0 {
			eol = "\r\n"
		}
		write(fmt.Sprintf("d%d/sub%d/f%02d.txt", i%3, i%2, i), text(20+rnd.Intn(60), eol))
		write(fmt.Sprintf("d%d/g%02d.go", i%4, i), text(10, "\n"))
	}
	long := bytes.Repeat([]byte("abcdefgh"), 40000) // 320 KB
	copy(long[1000:], "needle")
	copy(long[200000:], "needle")
	write("long.txt", append(append([]byte("needle first\n"), long...), "\nneedle after\n"...))
	write("bin/nul-first.bin", append([]byte("\x00\x01needle\n"), text(5, "\n")...))
	write("bin/nul-later.bin", append(text(30, "\n"), "\x00needle\x00\n"...))
	write("bad\xffname.txt", []byte("needle in a badly named file\n"))
	write("bad\xfedir/inner.txt", []byte("needle inside\n"))
	write(".hidden.txt", []byte("needle hidden\n"))
	write(".ignore", []byte("ignored.txt\n"))
	write("ignored.txt", []byte("needle ignored\n"))
	write(searchTempPrefix+"123", []byte("needle in a temp file\n"))
	write("d1/"+searchTempPrefix+"456", []byte("needle in a temp file\n"))
	write("nonl.txt", []byte("needle with no final newline"))
	if err := os.Symlink("d1", filepath.Join(root, "d1link")); err != nil {
		t.Fatal(err)
	}
	return root
}

// fs_grep returns what rg itself finds on the same tree (paths, line
// numbers, offsets, text or bytes, submatches, context), sorted, across
// option combinations, paging with a cursor; temp files never appear.
func TestGrepMatchesRG(t *testing.T) {
	root := searchTree(t)
	const max = 48 << 10
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	cases := []struct {
		args map[string]any
		rg   []string
		dir  string
	}{
		{map[string]any{"path": "", "pattern": "needle"}, []string{"--regexp=needle"}, ""},
		{map[string]any{"path": "", "pattern": "NEEDLE", "ignore_case": true}, []string{"--ignore-case", "--regexp=NEEDLE"}, ""},
		{map[string]any{"path": "", "pattern": "ne.dle", "literal": true}, []string{"--fixed-strings", "--regexp=ne.dle"}, ""},
		{map[string]any{"path": "", "pattern": "ne.dle"}, []string{"--regexp=ne.dle"}, ""},
		{map[string]any{"path": "", "pattern": "needle", "context": 2}, []string{"--context=2", "--regexp=needle"}, ""},
		{map[string]any{"path": "", "pattern": "needle", "max_count": 2}, []string{"--max-count=2", "--regexp=needle"}, ""},
		{map[string]any{"path": "", "pattern": "needle", "glob": []string{"*.txt", "!d1/**"}}, []string{"--regexp=needle", "--glob=*.txt", "--glob=!d1/**"}, ""},
		{map[string]any{"path": "", "pattern": "needle", "hidden": true, "no_ignore": true}, []string{"--hidden", "--no-ignore", "--regexp=needle"}, ""},
		{map[string]any{"path": "", "pattern": "(?-u:\\xff)"}, []string{"--regexp=(?-u:\\xff)"}, ""},
		{map[string]any{"path": "", "pattern": "\\r$"}, []string{"--regexp=\\r$"}, ""},
		{map[string]any{"pattern": "needle", "path": "d1"}, []string{"--regexp=needle"}, "d1"},
		{map[string]any{"pattern": "needle", "path": "/d2/sub0/"}, []string{"--regexp=needle"}, "d2/sub0"},
	}
	for _, c := range cases {
		rgArgs := append(c.rg, "--glob=!"+searchTempPrefix+"*", "--", ".")
		want, searches := rgGrep(t, filepath.Join(root, c.dir), c.dir, rgArgs...)
		if len(want) == 0 {
			t.Fatalf("%v: rg finds nothing; the tree does not exercise the case", c.args)
		}
		got, last, _ := grepAll(t, s, c.args, max)
		compareLines(t, fmt.Sprint(c.args), got, want)
		nmatch := 0
		for _, l := range want {
			if l.Typ == "match" {
				nmatch++
			}
		}
		if last.num("matches") != int64(nmatch) || last.num("files_matched") != searches {
			t.Errorf("%v: totals matches=%d files_matched=%d, rg: %d, %d", c.args, last.num("matches"), last.num("files_matched"), nmatch, searches)
		}
		for _, l := range got {
			if strings.Contains(l.Path, searchTempPrefix) {
				t.Fatalf("%v: a temp file was searched: %v", c.args, l)
			}
		}
	}
	// The kinds of line the tree is made of all came through.
	all, _, pages := grepAll(t, s, map[string]any{"path": "", "pattern": "needle|\\xff|\\r", "hidden": true}, max)
	var sawBytes, sawCRLF, sawCut, sawBadName bool
	for _, l := range all {
		sawBytes = sawBytes || !utf8.Valid([]byte(l.Text))
		sawCRLF = sawCRLF || strings.HasSuffix(l.Text, "\r\n")
		sawCut = sawCut || l.LineLength > int64(len(l.Text))
		sawBadName = sawBadName || !utf8.Valid([]byte(l.Path))
	}
	if !sawBytes || !sawCRLF || !sawCut || !sawBadName || pages < 2 {
		t.Errorf("bytes %v, CRLF %v, cut line %v, bad name %v, %d pages: the tree did not exercise every case", sawBytes, sawCRLF, sawCut, sawBadName, pages)
	}
}

// rgFiles runs rg --files in dir and returns the sorted, NUL-separated
// paths with prefix.
func rgFiles(t testing.TB, dir, prefix string, args ...string) []string {
	t.Helper()
	out := rawRG(t, dir, append([]string{"--no-config", "--files", "--null", "--no-ignore-parent", "--no-ignore-global"}, args...)...)
	var paths []string
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) == 0 {
			continue
		}
		s := strings.TrimPrefix(string(p), "./")
		if prefix != "" {
			s = prefix + "/" + s
		}
		paths = append(paths, s)
	}
	sort.Strings(paths)
	return paths
}

func globAll(t testing.TB, s *server, args map[string]any, max int) ([]string, reply) {
	t.Helper()
	args = maps(args)
	var paths []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("too many pages")
		}
		r := s.wantOK("fs_glob", args)
		if len(r.text) > max {
			t.Fatalf("reply of %d bytes exceeds %d", len(r.text), max)
		}
		for _, f := range r.doc["files"].([]any) {
			paths = append(paths, b64(t, f.(map[string]any), "path"))
		}
		if r.doc["truncated"] != true {
			return paths, r
		}
		args["cursor"] = r.str("cursor")
	}
}

// fs_glob's pages are rendered by the worker and placed by the front-end
// as they are: names with quotes, backslashes, control bytes and bytes that
// are not UTF-8 come back exactly, across pages of 4 KiB whose cursors
// land on each kind of name, with nothing repeated or lost.
func TestGlobPagesRenderedNames(t *testing.T) {
	root := t.TempDir()
	var want []string
	for i := range 120 {
		for _, f := range []string{"q\"uote-%03d", "back\\slash-%03d", "bad\xff-%03d", "tab\tand\x01-%03d", "plain-%03d"} {
			name := fmt.Sprintf(f, i)
			writeFile(t, filepath.Join(root, name), nil, 0o644)
			want = append(want, name)
		}
	}
	sort.Strings(want)
	const max = 4096
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	got, _ := globAll(t, s, map[string]any{"path": "", "pattern": "*"}, max)
	if !slices.Equal(got, want) {
		t.Fatalf("fs_glob listed %d names, want %d:\n got %.400q\nwant %.400q", len(got), len(want), got, want)
	}
}

// fs_glob lists what rg --files lists, sorted, without temp files.
func TestGlobMatchesRG(t *testing.T) {
	root := searchTree(t)
	const max = 4096
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	cases := []struct {
		args map[string]any
		rg   []string
		dir  string
	}{
		{map[string]any{"path": "", "pattern": "*.txt"}, []string{"--glob=*.txt"}, ""},
		{map[string]any{"path": "", "pattern": "**/sub1/**"}, []string{"--glob=**/sub1/**"}, ""},
		{map[string]any{"path": "", "pattern": "!*.go"}, []string{"--glob=!*.go"}, ""},
		{map[string]any{"path": "", "pattern": "*", "hidden": true, "no_ignore": true}, []string{"--hidden", "--no-ignore", "--glob=*"}, ""},
		{map[string]any{"pattern": "*.go", "path": "d1"}, []string{"--glob=*.go"}, "d1"},
		{map[string]any{"path": "", "pattern": "bad*"}, []string{"--glob=bad*"}, ""},
	}
	for _, c := range cases {
		want := rgFiles(t, filepath.Join(root, c.dir), c.dir, append(c.rg, "--glob=!"+searchTempPrefix+"*", "--", ".")...)
		if len(want) == 0 {
			t.Fatalf("%v: rg lists nothing", c.args)
		}
		got, last := globAll(t, s, c.args, max)
		if !slices.Equal(got, want) {
			t.Errorf("fs_glob(%v) = %q\nrg: %q", c.args, got, want)
		}
		if last.num("total") != int64(len(want)) {
			t.Errorf("fs_glob(%v) total %d, want %d", c.args, last.num("total"), len(want))
		}
	}
}

// Client strings that look like rg options are data: as patterns, globs
// and paths they change nothing, and neither does RIPGREP_CONFIG_PATH in
// fsmcp's own environment.
func TestSearchInjection(t *testing.T) {
	injections := []string{"--pre=sh", "-L", "--follow", "--files", "-e", "--hidden", "--no-ignore"}
	content := strings.Join(injections, "\n") + "\nplain\n"
	root := filepath.Join(t.TempDir(), "root")
	files := map[string]string{
		"inj.txt":        content,
		"sub/deep.txt":   content,
		"--pre=sh/x.txt": "plain\n",
		".h.txt":         content,
		"ign.txt":        content,
		".ignore":        "ign.txt\n",
		"--files":        "",
	}
	for name, c := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub", filepath.Join(root, "linkdir")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "ripgreprc")
	if err := os.WriteFile(cfg, []byte("--follow\n--hidden\n--no-ignore\n--pre=sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"", cfg} {
		t.Run(fmt.Sprintf("config=%v", env != ""), func(t *testing.T) {
			if env != "" {
				t.Setenv("RIPGREP_CONFIG_PATH", env)
			}
			s := start(t, root)
			for _, p := range injections {
				// Only the two visible files hold the line; hidden,
				// ignored and symlinked copies stay out.
				got := grepPage(t, s.wantOK("fs_grep", map[string]any{"path": "", "pattern": p}))
				var paths []string
				for _, l := range got {
					paths = append(paths, l.Path)
					if !strings.Contains(l.Text, p) {
						t.Errorf("fs_grep(%q) returned line %q", p, l.Text)
					}
				}
				if want := []string{"inj.txt", "sub/deep.txt"}; !slices.Equal(paths, want) {
					t.Errorf("fs_grep(%q) paths %q, want %q", p, paths, want)
				}
				// As a glob, it matches names: only the file called
				// --files exists.
				files, _ := globAll(t, s, map[string]any{"path": "", "pattern": p}, 1<<20)
				wantFiles := []string(nil)
				if p == "--files" {
					wantFiles = []string{"--files"}
				}
				if !slices.Equal(files, wantFiles) {
					t.Errorf("fs_glob(%q) = %q, want %q", p, files, wantFiles)
				}
				r := s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "plain", "glob": []string{p}})
				if n := len(grepPage(t, r)); n != 0 {
					t.Errorf("fs_grep(glob %q) = %s, want nothing", p, r.text)
				}
			}
			// A directory named like an option is searched as a path.
			got := grepPage(t, s.wantOK("fs_grep", map[string]any{"pattern": "plain", "path": "--pre=sh"}))
			if len(got) != 1 || got[0].Path != "--pre=sh/x.txt" {
				t.Errorf("fs_grep(path --pre=sh) = %v", got)
			}
			// rg's own listing without any configuration; a glob
			// re-includes hidden and ignored files, but --follow
			// would add linkdir/deep.txt.
			files, _ := globAll(t, s, map[string]any{"path": "", "pattern": "*"}, 1<<20)
			want := rgFiles(t, root, "", "--glob=*", "--glob=!"+searchTempPrefix+"*", "--", ".")
			if !slices.Equal(files, want) || slices.Contains(files, "linkdir/deep.txt") {
				t.Errorf("fs_glob(*) = %q, want %q", files, want)
			}
		})
	}
}

// Nothing outside the root is ever searched or listed: escaping path
// arguments are outside_root before rg starts, symlinked directories are
// not followed, and globs cannot climb out.
func TestSearchEscapes(t *testing.T) {
	root, outside := tree(t)
	s := start(t, root)
	for _, p := range []string{"..", "../outside", "link_out", "dirlink_out", "dirlink_out/secret.txt", "abs_in",
		"sub/../../outside", "/../outside/secret.txt", "/" + outside} {
		for _, tool := range []string{"fs_grep", "fs_glob"} {
			r := s.wantErr(tool, map[string]any{"pattern": "*", "path": p}, "outside_root")
			noHostPath(t, r.text, root)
		}
	}
	// A fifo is refused, and never blocks.
	s.wantErr("fs_grep", map[string]any{"pattern": "x", "path": "fifo"}, "not_regular")
	s.wantErr("fs_glob", map[string]any{"pattern": "*", "path": "fifo"}, "not_regular")
	s.wantErr("fs_grep", map[string]any{"pattern": "x", "path": "dangling"}, "not_found")
	s.wantErr("fs_glob", map[string]any{"pattern": "*.go", "path": "a.txt"}, "not_a_directory")

	for _, args := range []map[string]any{
		{"path": "", "pattern": "secret"},
		{"path": "", "pattern": "secret", "hidden": true, "no_ignore": true},
		{"path": "", "pattern": "secret", "glob": []string{"../**"}},
		{"path": "", "pattern": "secret", "glob": []string{"/etc/*", outside + "/*", "**/secret.txt"}},
		{"pattern": "secret", "path": "sub", "glob": []string{"../**"}},
	} {
		r := s.wantOK("fs_grep", args)
		if len(grepPage(t, r)) != 0 || strings.Contains(r.text, "outside secret") {
			t.Errorf("fs_grep(%v) = %s, want nothing", args, r.text)
		}
		noHostPath(t, r.text, root)
	}
	for _, g := range []string{"../**", "/etc/*", "../outside/*", outside + "/*", "**/secret.txt", "**", "dirlink_out/**"} {
		files, _ := globAll(t, s, map[string]any{"path": "", "pattern": g, "hidden": true, "no_ignore": true}, 1<<20)
		for _, f := range files {
			if f != "a.txt" && f != "sub/b.txt" {
				t.Errorf("fs_glob(%q) lists %q", g, f)
			}
		}
	}
	// Symlinks inside the root are not followed while walking, but a
	// path argument that is one is resolved through the root.
	r := s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "hello"})
	if got := grepPage(t, r); len(got) != 1 || got[0].Path != "a.txt" {
		t.Errorf("fs_grep(hello) = %s", r.text)
	}
	r = s.wantOK("fs_grep", map[string]any{"pattern": "hello", "path": "link_in"})
	if got := grepPage(t, r); len(got) != 1 || got[0].Path != "link_in" || got[0].Text != "hello\n" {
		t.Errorf("fs_grep(path link_in) = %s", r.text)
	}
	r = s.wantOK("fs_grep", map[string]any{"pattern": "bee", "path": "sub/b.txt"})
	if got := grepPage(t, r); len(got) != 1 || got[0].Path != "sub/b.txt" {
		t.Errorf("fs_grep(path sub/b.txt) = %s", r.text)
	}
}

// Temp files of atomic writes are never listed or searched, whatever the
// globs and flags, and cannot be named as a path.
func TestSearchHidesTempFiles(t *testing.T) {
	root, _ := tree(t)
	for _, p := range []string{searchTempPrefix + "a", "sub/" + searchTempPrefix + "b"} {
		if err := os.WriteFile(filepath.Join(root, p), []byte("hello from a temp file\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, root)
	for _, g := range []string{searchTempPrefix + "*", "**/" + searchTempPrefix + "*", "*", "**", ".*"} {
		files, last := globAll(t, s, map[string]any{"path": "", "pattern": g, "hidden": true, "no_ignore": true}, 1<<20)
		for _, f := range files {
			if strings.Contains(f, searchTempPrefix) {
				t.Errorf("fs_glob(%q) lists %q", g, f)
			}
		}
		if last.num("total") != int64(len(files)) {
			t.Errorf("fs_glob(%q) total %d for %d files", g, last.num("total"), len(files))
		}
		r := s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "hello", "glob": []string{g}, "hidden": true, "no_ignore": true})
		if strings.Contains(r.text, "temp file") || strings.Contains(r.text, searchTempPrefix) {
			t.Errorf("fs_grep(glob %q) = %s", g, r.text)
		}
	}
	r := s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "hello", "hidden": true})
	if r.num("matches") != 1 {
		t.Errorf("fs_grep(hello) counts %d matches, want 1: %s", r.num("matches"), r.text)
	}
	s.wantErr("fs_grep", map[string]any{"pattern": "hello", "path": searchTempPrefix + "a"}, "not_found")
	s.wantErr("fs_glob", map[string]any{"pattern": "*", "path": "sub/" + searchTempPrefix + "b"}, "not_found")
}

// An invalid regex or glob is invalid_argument with rg's reason, and no
// host path.
func TestSearchInvalidPattern(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"fs_grep", map[string]any{"path": "", "pattern": "("}, "unclosed group"},
		{"fs_grep", map[string]any{"path": "", "pattern": "[z-a]"}, "invalid character class range"},
		{"fs_grep", map[string]any{"path": "", "pattern": "x", "glob": []string{"["}}, "error parsing glob"},
		{"fs_glob", map[string]any{"path": "", "pattern": "a[b"}, "error parsing glob"},
		{"fs_glob", map[string]any{"path": "", "pattern": "{a"}, "error parsing glob"},
	} {
		r := s.wantErr(c.tool, c.args, "invalid_argument")
		msg := r.doc["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s(%v) message %q, want it to contain %q", c.tool, c.args, msg, c.want)
		}
		noHostPath(t, r.text, root)
	}
	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "x", "max_count": 0}, "invalid_argument")
	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "x", "context": -1}, "invalid_argument")
	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "x", "cursor": "AA"}, "invalid_argument")
	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": "x", "glob": "*.go"}, "invalid_argument")
	s.wantErr("fs_glob", map[string]any{"path": ""}, "invalid_argument")
}

// 100,000 matching lines give bounded replies, and the cursor walks every
// one of them exactly once, in order.
func TestGrepCursorWalksAllMatches(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(filepath.Join(root, "many"), 0o755); err != nil {
		t.Fatal(err)
	}
	type pos struct {
		path   string
		offset int64
	}
	var want []pos
	add := func(name string, n int) {
		var b bytes.Buffer
		for i := range n {
			want = append(want, pos{name, int64(b.Len())})
			fmt.Fprintf(&b, "match %06d %s\n", i, strings.Repeat("y", i%7))
		}
		if err := os.WriteFile(filepath.Join(root, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	add("big.txt", 50000)
	for i := range 25 {
		add(fmt.Sprintf("many/f%02d.txt", i), 2000)
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].path != want[j].path {
			return want[i].path < want[j].path
		}
		return want[i].offset < want[j].offset
	})
	const max = 4 << 20
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	got, last, pages := grepAll(t, s, map[string]any{"path": "", "pattern": "^match"}, max)
	if len(got) != len(want) || last.num("matches") != 100000 || pages < 3 {
		t.Fatalf("walked %d lines in %d pages (matches total %d), want %d", len(got), pages, last.num("matches"), len(want))
	}
	for i, l := range got {
		if l.Path != want[i].path || l.Offset != want[i].offset || !strings.HasPrefix(l.Text, "match ") {
			t.Fatalf("line %d = %v, want %v", i, l, want[i])
		}
	}

	// fs_glob pages the same way over 3,000 names.
	for i := range 3000 {
		if err := os.WriteFile(filepath.Join(root, "many", fmt.Sprintf("e%04d-%s", i, strings.Repeat("z", i%30))), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s = start(t, root, "--max-response-bytes", "4096")
	files, _ := globAll(t, s, map[string]any{"pattern": "e*", "path": "many"}, 4096)
	if wantFiles := rgFiles(t, filepath.Join(root, "many"), "many", "--glob=e*", "--", "."); len(files) != 3000 || !slices.Equal(files, wantFiles) {
		t.Fatalf("fs_glob walked %d names, want the 3000 rg lists", len(files))
	}
}

// rgProcs returns the pids of rg processes whose working directory is in
// dir: those of this test's server, and no one else's.
func rgProcs(t testing.TB, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "rg" {
			continue
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitFor polls cond for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// slowTree makes a search that takes rg minutes: text on which a
// Unicode-aware regex falls back to slow matching, hard-linked many times.
func slowTree(t testing.TB, megabytes, links int) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("héllo wörld ", 8) + "\n"
	content := strings.Repeat(line, megabytes<<20/len(line))
	first := filepath.Join(root, "slow-00.txt")
	if err := os.WriteFile(first, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < links; i++ {
		if err := os.Link(first, filepath.Join(root, fmt.Sprintf("slow-%02d.txt", i))); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const slowPattern = `(\b\w{1,20}\b\s*){40}\b\p{Lu}\b`

// A client's cancellation kills rg (the test watches it in the process
// table) and a call past --call-timeout is timeout; no rg outlives its
// call.
func TestSearchCancelKillsRG(t *testing.T) {
	root := slowTree(t, 4, 30)
	s := start(t, root)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_grep", Arguments: map[string]any{"path": "", "pattern": slowPattern}})
		done <- err
	}()
	if !waitUntil(20*time.Second, func() bool { return len(rgProcs(t, root)) > 0 }) {
		cancel()
		t.Fatal("rg never showed up in the process table")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if !waitUntil(10*time.Second, func() bool { return len(rgProcs(t, root)) == 0 }) {
		t.Fatalf("rg %v still runs after the call was cancelled", rgProcs(t, root))
	}
	// The server carries on.
	s.wantOK("fs_glob", map[string]any{"path": "", "pattern": "*"})

	s = start(t, root, "--call-timeout", "1500ms")
	begin := time.Now()
	s.wantErr("fs_grep", map[string]any{"path": "", "pattern": slowPattern}, "timeout")
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("timeout took %v", d)
	}
	if !waitUntil(10*time.Second, func() bool { return len(rgProcs(t, root)) == 0 }) {
		t.Fatalf("rg %v still runs after the call timed out", rgProcs(t, root))
	}
}

// A search that runs past ~250 ms sends MCP progress notifications with
// the client's token, and none without one.
func TestSearchProgress(t *testing.T) {
	root := slowTree(t, 1, 2)
	var mu sync.Mutex
	var notes []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			notes = append(notes, req.Params)
			mu.Unlock()
		},
	})
	cmd := fsmcpCommand(root)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer session.Close()
	s := &server{t: t, cmd: cmd, session: session, stderr: stderr}

	params := &mcp.CallToolParams{Name: "fs_grep", Arguments: map[string]any{"path": "", "pattern": slowPattern}}
	params.SetProgressToken("search-1")
	begin := time.Now()
	res, err := session.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	checkReply(t, "fs_grep", res)
	mu.Lock()
	got := slices.Clone(notes)
	notes = nil
	mu.Unlock()
	if took < 600*time.Millisecond {
		t.Skipf("the search took only %v; too fast to expect progress", took)
	}
	if len(got) == 0 {
		t.Fatalf("a %v search sent no progress notification", took)
	}
	for _, n := range got {
		if n.ProgressToken != "search-1" {
			t.Errorf("progress token %v, want search-1", n.ProgressToken)
		}
	}
	s.wantOK("fs_grep", map[string]any{"path": "", "pattern": slowPattern})
	mu.Lock()
	defer mu.Unlock()
	if len(notes) != 0 {
		t.Errorf("%d progress notifications without a token", len(notes))
	}
}

// The kernel refuses rg anything outside the root when it runs in the
// worker's Landlock domain, even on an absolute path that bypasses
// os.Root; the same rg outside the domain reads the file.
func TestSearchLandlockStopsRG(t *testing.T) {
	root, outside := tree(t)
	s := start(t, root)
	conf := s.wantOK("fs_stat", map[string]any{"path": ""}).doc["confinement"].(map[string]any)
	if conf["landlock_abi"].(float64) < 1 {
		t.Skip("the kernel offers no Landlock")
	}
	secret := filepath.Join(outside, "secret.txt")
	if out := rawRG(t, "/", "--no-config", "--regexp=.", "--", secret); !bytes.Contains(out, []byte("outside secret")) {
		t.Fatalf("rg outside the domain cannot read the secret either: %q", out)
	}
	inside := s.call("fs_stat", map[string]any{"path": hookPrefix + "rg:" + filepath.Join(root, "a.txt")}).text
	if !strings.Contains(inside, "hello") {
		t.Fatalf("rg in the worker's domain cannot read inside the root: %s", inside)
	}
	for _, p := range []string{secret, outside} {
		r := s.call("fs_stat", map[string]any{"path": hookPrefix + "rg:" + p}).text
		if !strings.Contains(r, "Permission denied") || strings.Contains(r, "outside secret") {
			t.Errorf("rg in the worker's domain on %s: %s", p, r)
		}
	}
}

// The worker's own process group is not touched: after searches the
// worker is alive and has no zombie children.
func TestSearchLeavesNoChildren(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for range 5 {
		s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "e"})
		s.wantOK("fs_glob", map[string]any{"path": "", "pattern": "*"})
	}
	frontPID := s.cmd.Process.Pid
	// A process's children are listed per thread that started them.
	children := func(pid int) []int {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		var out []int
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
			for _, f := range strings.Fields(string(b)) {
				var c int
				fmt.Sscanf(f, "%d", &c)
				out = append(out, c)
			}
		}
		return out
	}
	workers := children(frontPID)
	if len(workers) != 1 {
		t.Fatalf("front-end has children %v, want one worker", workers)
	}
	for _, w := range workers {
		for _, c := range children(w) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
			t.Errorf("worker %d still has child %d: %s", w, c, stat)
		}
		if err := syscall.Kill(w, 0); err != nil {
			t.Errorf("worker %d: %v", w, err)
		}
	}
}

// A file or directory rg cannot read does not fail the search: the others
// are searched, and the reply counts what was unreadable (rg's exit status
// 2 with results). Permission bits stop only a process without
// CAP_DAC_OVERRIDE, so as root the server runs as nobody.
func TestSearchUnreadableFiles(t *testing.T) {
	base := t.TempDir()
	exe := os.Args[0]
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		// nobody must reach the tree and the binary.
		for d := base; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		exe = filepath.Join(base, "fsmcp.test")
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	root := filepath.Join(base, "root")
	for _, d := range []string{root, filepath.Join(root, "locked-dir")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"open.txt", "locked.txt", "locked-dir/inner.txt"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("needle\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "locked.txt"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "locked-dir"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "locked-dir"), 0o755) })

	cmd := exec.Command(exe, "--root", root)
	if cred != nil {
		cmd.Args = append(cmd.Args, stateDirIn(t, base, int(cred.Uid), int(cred.Gid)))
	}
	cmd.Env = append(os.Environ(), "FSMCP_TEST_FRONTEND=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer session.Close()
	s := &server{t: t, cmd: cmd, session: session, stderr: stderr}

	r := s.wantOK("fs_grep", map[string]any{"path": "", "pattern": "needle"})
	got := grepPage(t, r)
	if len(got) != 1 || got[0].Path != "open.txt" || r.num("unreadable") != 2 {
		t.Errorf("fs_grep(needle) = %s, want open.txt and 2 unreadable", r.text)
	}
	files, last := globAll(t, s, map[string]any{"path": "", "pattern": "*"}, 1<<20)
	if want := []string{"locked.txt", "open.txt"}; !slices.Equal(files, want) || last.num("unreadable") != 1 {
		t.Errorf("fs_glob(*) = %q (%s), want %q and 1 unreadable", files, last.text, want)
	}
	noHostPath(t, r.text+last.text, root)
}
