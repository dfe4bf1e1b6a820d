package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/admit"
	"github.com/fsmcp/fsmcp/worker/internal/rgargs"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"google.golang.org/protobuf/proto"
)

// The differential suite: trees generated from a seed, listed and searched
// through a real worker (in this process, with rg, without Landlock), and
// compared with a reference that is a plain walk of the tree plus rg run
// directly. What rg decides (ignore files, hidden names, exclusions) the
// reference asks rg about a shadow of the tree: the same directories, each
// holding a marker file, and every other entry an empty regular file of
// the same name, so that `rg --files` names every entry it would keep.
// See docs/design/oracle.md.

// oracleTrees is how many trees TestOracle checks; FSMCP_ORACLE_TREES and
// FSMCP_ORACLE_SEED (scripts/oracle) run more, from another first seed.
const oracleTrees = 6

// oracleMark is the marker file in each directory of a shadow: no
// generated ignore rule or exclusion matches it.
const oracleMark = "ORACLE-MARK"

// oracleNames are the names a tree is made of: spaces, a newline, bytes
// that are not UTF-8, hidden names, and names the rules below match.
var oracleNames = []string{"a", "b", "src", "lib", "deep", "x.go", "y.txt", "z.log", "keep.log", "with space", "new\nline",
	"bad\xffname", ".hid", ".hfile", "w", "notes.md", "zz"}

// oracleRules are the lines of generated ignore files; oracleExcludes the
// exclusions the calls pass.
var (
	oracleRules    = []string{"*.log", "!keep.log", "z*", "b/", "deep", "/src", "lib/", "with space", "*.txt", "x.go", "a/w", "new?line"}
	oracleExcludes = []string{"*.txt", "b", "deep", "*.log", "src", "*.md"}
	oracleWords    = []string{"needle", "Needle", "hay", "stack", "x", "", "ne edle", "needle needle", "\tneedle\t"}
)

// oracleCalls counts the calls compared, by RPC; oracleEntries the
// entries of the trees.
var (
	oracleCalls   = map[string]int{}
	oracleEntries int
)

// oracleTree is a generated tree.
type oracleTree struct {
	root string
	// depth is the depth of its deepest entry.
	depth int
	// left is how many more entries it may have.
	left int
}

// genTree writes a tree from rng below root (which exists).
func genTree(t testing.TB, rng *rand.Rand, root string) *oracleTree {
	tr := &oracleTree{root: root, left: 40 + rng.IntN(120)}
	if rng.IntN(2) == 0 {
		// .gitignore counts only in a repository.
		must(t, os.Mkdir(filepath.Join(root, ".git"), 0o755))
	}
	tr.dir(t, rng, root, 1)
	return tr
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dir fills the directory p, whose entries are at depth.
func (tr *oracleTree) dir(t testing.TB, rng *rand.Rand, p string, depth int) {
	tr.depth = max(tr.depth, depth)
	n := rng.IntN(8)
	if depth == 1 {
		n += 4
	}
	if rng.IntN(12) == 0 {
		n = 30 + rng.IntN(30) // wide
	}
	used := map[string]bool{}
	for range n {
		name := oracleNames[rng.IntN(len(oracleNames))]
		if rng.IntN(3) == 0 {
			name += fmt.Sprint(rng.IntN(4))
		}
		if used[name] || tr.left <= 0 {
			continue
		}
		tr.left--
		used[name] = true
		q := filepath.Join(p, name)
		switch k := rng.IntN(20); {
		case k < 9:
			must(t, os.WriteFile(q, genContent(rng), 0o644))
		case k < 13 && depth < 7, k < 14 && depth < 16 && rng.IntN(3) == 0:
			must(t, os.Mkdir(q, 0o755))
			if rng.IntN(5) > 0 {
				tr.dir(t, rng, q, depth+1)
			}
		case k < 17:
			targets := []string{"x.go", ".", "..", "nowhere", strings.Repeat("../", depth+1) + "outside", "/etc", "a/b"}
			must(t, os.Symlink(targets[rng.IntN(len(targets))], q))
		case k < 18:
			must(t, syscall.Mkfifo(q, 0o644))
		default:
			files := []string{".gitignore", ".ignore", ".rgignore"}
			var rules []string
			for range 1 + rng.IntN(3) {
				rules = append(rules, oracleRules[rng.IntN(len(oracleRules))])
			}
			must(t, os.WriteFile(filepath.Join(p, files[rng.IntN(len(files))]), []byte(strings.Join(rules, "\n")+"\n"), 0o644))
		}
	}
	if depth == 1 || rng.IntN(10) == 0 {
		// A chain of directories, deeper than the default depth.
		// Each step is a new directory or one made before, never
		// through a symlink.
		q := p
		for range 2 + rng.IntN(8) {
			next := filepath.Join(q, oracleNames[rng.IntN(5)])
			if err := os.Mkdir(next, 0o755); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(next); err != nil || !fi.IsDir() {
				break
			}
			q = next
		}
		if q != p {
			must(t, os.WriteFile(filepath.Join(q, "chain.go"), genContent(rng), 0o644))
			tr.depth = max(tr.depth, strings.Count(strings.TrimPrefix(q, tr.root), "/")+1)
		}
	}
}

// genContent is a file's bytes: lines of words, with CRLF, no final
// newline, or a NUL now and then.
func genContent(rng *rand.Rand) []byte {
	var b bytes.Buffer
	eol := "\n"
	if rng.IntN(6) == 0 {
		eol = "\r\n"
	}
	for range rng.IntN(12) {
		for range 1 + rng.IntN(3) {
			b.WriteString(oracleWords[rng.IntN(len(oracleWords))])
			b.WriteByte(' ')
		}
		b.WriteString(eol)
	}
	switch rng.IntN(10) {
	case 0:
		b.WriteString("last needle")
	case 1:
		b.WriteString("bin\x00ary needle\n")
	}
	return b.Bytes()
}

// refEntry is an entry of a tree as a plain walk finds it.
type refEntry struct {
	path  string
	typ   fsmcpv1.FileType
	size  int64
	mtime int64
	depth int
	// lsize is lstat's size, whatever the type.
	lsize int64
}

// walk is every entry below the root, in path order, never following a
// symlink.
func (tr *oracleTree) walk(t testing.TB) []refEntry {
	var out []refEntry
	must(t, filepath.WalkDir(tr.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == tr.root {
			return nil
		}
		rel, _ := filepath.Rel(tr.root, p)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		e := refEntry{path: rel, typ: fileType(st.Mode), mtime: st.Mtim.Nano(), depth: strings.Count(rel, "/") + 1, lsize: st.Size}
		if e.typ == fsmcpv1.FileType_FILE_TYPE_FILE {
			e.size = st.Size
		}
		out = append(out, e)
		return nil
	}))
	slices.SortFunc(out, func(a, b refEntry) int { return strings.Compare(a.path, b.path) })
	return out
}

// oracleOpts are the options that change what rg keeps.
type oracleOpts struct {
	hidden, noIgnore bool
	excludes         []string
}

func (o oracleOpts) args() []string {
	args := rgargs.Common(o.hidden, o.noIgnore)
	for _, g := range o.excludes {
		args = append(args, "--glob=!"+g)
	}
	return args
}

// kept returns, for options o and a search of the directory dir ("" for
// the root), which entries below dir rg keeps: it builds the tree's shadow
// once and asks rg --files about it, in dir, as the worker runs rg.
func (tr *oracleTree) kept(t testing.TB, ents []refEntry, o oracleOpts, dir string) func(refEntry) bool {
	shadow := tr.root + ".shadow"
	if _, err := os.Lstat(shadow); err != nil {
		must(t, os.Mkdir(shadow, 0o755))
		must(t, os.WriteFile(filepath.Join(shadow, oracleMark), nil, 0o644))
		for _, e := range ents {
			q := filepath.Join(shadow, e.path)
			switch base := filepath.Base(e.path); {
			case e.typ == fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
				must(t, os.Mkdir(q, 0o755))
				must(t, os.WriteFile(filepath.Join(q, oracleMark), nil, 0o644))
			case e.typ == fsmcpv1.FileType_FILE_TYPE_FILE && (base == ".gitignore" || base == ".ignore" || base == ".rgignore"):
				b, err := os.ReadFile(filepath.Join(tr.root, e.path))
				must(t, err)
				must(t, os.WriteFile(q, b, 0o644))
			default:
				must(t, os.WriteFile(q, nil, 0o644))
			}
		}
	}
	listed := map[string]bool{}
	for _, p := range rgList(t, filepath.Join(shadow, dir), append(o.args(), "--files")...) {
		listed[joinRel(dir, p)] = true
	}
	return func(e refEntry) bool {
		if e.typ == fsmcpv1.FileType_FILE_TYPE_DIRECTORY {
			return listed[e.path+"/"+oracleMark]
		}
		return listed[e.path]
	}
}

// rgList runs rg with args (and --null) in dir and returns the paths it
// prints, without "./".
func rgList(t testing.TB, dir string, args ...string) []string {
	cmd := exec.Command("rg", append(args, "--null", "--", ".")...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil && len(out) > 0 {
		t.Fatalf("rg %q: %v", args, err)
	}
	var paths []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			paths = append(paths, strings.TrimPrefix(p, "./"))
		}
	}
	slices.Sort(paths)
	return paths
}

// oracleService serves a fresh generated tree from seed.
func oracleService(t *testing.T, seed uint64) (*oracleTree, fsmcpv1.WorkerServiceClient) {
	s := newSearchService(t, admit.Limits{})
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	tr := genTree(t, rng, s.testDir)
	return tr, serveInProcess(t, s.Service)
}

// checkOracle compares every search of one tree with the reference.
func checkOracle(t *testing.T, seed uint64) {
	tr, c := oracleService(t, seed)
	rng := rand.New(rand.NewPCG(seed^0x5eed, 7))
	ents := tr.walk(t)
	oracleEntries += len(ents)
	opts := []oracleOpts{{}, {hidden: true}, {noIgnore: true}, {hidden: true, noIgnore: true}}
	for range 2 {
		o := oracleOpts{hidden: rng.IntN(2) == 0, noIgnore: rng.IntN(3) == 0}
		for range 1 + rng.IntN(2) {
			o.excludes = append(o.excludes, oracleExcludes[rng.IntN(len(oracleExcludes))])
		}
		opts = append(opts, o)
	}
	for _, o := range opts {
		kept := tr.kept(t, ents, o, "")
		for depth := 1; depth <= min(tr.depth+1, maxTreeDepth); depth++ {
			checkTree(t, c, "", ents, kept, o, depth, int64(300+rng.IntN(6000)))
		}
		// A directory's subtree: ignore files above it do not count.
		if dirs := slices.DeleteFunc(slices.Clone(ents), func(e refEntry) bool {
			return e.typ != fsmcpv1.FileType_FILE_TYPE_DIRECTORY
		}); len(dirs) > 0 {
			dir := dirs[rng.IntN(len(dirs))].path
			checkTree(t, c, dir, ents, tr.kept(t, ents, o, dir), o, 1+rng.IntN(4), int64(300+rng.IntN(6000)))
		}
		checkGlob(t, c, tr, ents, o, rng)
		checkGrep(t, c, tr, o, rng)
	}
	checkList(t, c, ents, rng)
	checkDigest(t, c, tr, ents, rng)
	checkReadLines(t, c, tr, ents, rng)
}

// checkTree compares fs_tree at depth, every page of max bytes, with the
// walk's entries that rg keeps.
func checkTree(t *testing.T, c fsmcpv1.WorkerServiceClient, dir string, ents []refEntry, kept func(refEntry) bool, o oracleOpts, depth int, maxBytes int64) {
	t.Helper()
	var want []string
	below := depthOf(dir)
	for i, e := range ents {
		if dir != "" && !strings.HasPrefix(e.path, dir+"/") || e.depth-below > depth || !kept(e) {
			continue
		}
		l := fmt.Sprintf("%q %v %d", e.path, e.typ, e.size)
		if e.typ == fsmcpv1.FileType_FILE_TYPE_DIRECTORY && e.depth-below == depth {
			for _, c := range ents[i+1:] {
				if !strings.HasPrefix(c.path, e.path+"/") {
					break
				}
				if c.depth-below == depth+1 && kept(c) {
					l += " more"
					break
				}
			}
		}
		want = append(want, l)
	}
	req := &fsmcpv1.TreeRequest{Path: []byte(dir), MaxDepth: int32(depth), Hidden: o.hidden, NoIgnore: o.noIgnore, Excludes: o.excludes, MaxBytes: maxBytes}
	var got []string
	for pages := 0; ; pages++ {
		if pages > len(want)+1 {
			t.Fatalf("tree %q %+v depth %d: more pages than entries", dir, o, depth)
		}
		oracleCalls["tree"]++
		msgs, err := workertest.Drain(c.Tree(context.Background(), req))
		if err != nil {
			t.Fatalf("tree %q %+v depth %d: %v", dir, o, depth, err)
		}
		last := msgs[len(msgs)-1].(*fsmcpv1.TreeResponse)
		if last.Total != int64(len(want)) || last.Errors != 0 {
			t.Errorf("tree %q %+v depth %d page %d: total %d errors %d, want %d", dir, o, depth, pages, last.Total, last.Errors, len(want))
		}
		for _, e := range last.Entries {
			l := fmt.Sprintf("%q %v %d", e.Path, e.Type, e.Size)
			if e.More {
				l += " more"
			}
			got = append(got, l)
		}
		if !last.More {
			break
		}
		if len(last.Entries) == 0 {
			t.Fatalf("tree %q %+v depth %d: an empty page with more", dir, o, depth)
		}
		req.After, req.HasAfter = last.Entries[len(last.Entries)-1].Path, true
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tree %q %+v depth %d: %s", dir, o, depth, lineDiff(got, want))
	}
}

// TestOracle runs the differential suite on a few trees; scripts/oracle
// runs it on many.
func TestOracle(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("no rg: ", err)
	}
	n, seed := uint64(oracleTrees), uint64(1)
	if v := os.Getenv("FSMCP_ORACLE_TREES"); v != "" {
		_, err := fmt.Sscan(v, &n)
		must(t, err)
	}
	if v := os.Getenv("FSMCP_ORACLE_SEED"); v != "" {
		_, err := fmt.Sscan(v, &seed)
		must(t, err)
	}
	for i := range n {
		t.Run(fmt.Sprint(seed+i), func(t *testing.T) { checkOracle(t, seed+i) })
		if (i+1)%100 == 0 && i+1 < n {
			t.Logf("%d trees, %d entries", i+1, oracleEntries)
		}
	}
	t.Logf("%d trees from seed %d, %d entries; calls compared: %v", n, seed, oracleEntries, oracleCalls)
}

// FuzzOracle runs the differential suite on the tree each input's seed
// makes.
func FuzzOracle(f *testing.F) {
	if _, err := exec.LookPath("rg"); err != nil {
		f.Skip("no rg: ", err)
	}
	for _, seed := range []uint64{1, 2, 3} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkOracle(t, seed) })
}

// oraclePatterns are fs_glob's patterns in the suite.
var oraclePatterns = []string{"**", "*", "*.go", "**/*.txt", "a/**", "{x,y}*", "**/new*"}

// checkGlob compares fs_glob, every page, sorted by path or by mtime,
// with rg --files run directly, ordered by the walk's lstat.
func checkGlob(t *testing.T, c fsmcpv1.WorkerServiceClient, tr *oracleTree, ents []refEntry, o oracleOpts, rng *rand.Rand) {
	t.Helper()
	pattern := oraclePatterns[rng.IntN(len(oraclePatterns))]
	depth := rng.IntN(tr.depth + 2)
	byMtime := rng.IntN(2) == 0
	// Exclusions come after the pattern: the last matching glob wins.
	args := append(rgargs.Common(o.hidden, o.noIgnore), "--files", "--glob="+pattern)
	for _, g := range o.excludes {
		args = append(args, "--glob=!"+g)
	}
	if depth > 0 {
		args = append(args, fmt.Sprintf("--max-depth=%d", depth))
	}
	want := rgList(t, tr.root, args...)
	if byMtime {
		mtime := map[string]int64{}
		for _, e := range ents {
			mtime[e.path] = e.mtime
		}
		slices.SortStableFunc(want, func(a, b string) int { return -cmpInt(mtime[a], mtime[b]) })
	}
	req := &fsmcpv1.GlobRequest{Pattern: pattern, Hidden: o.hidden, NoIgnore: o.noIgnore, Excludes: o.excludes,
		MaxDepth: int32(depth), MaxBytes: int64(100 + rng.IntN(1000))}
	if byMtime {
		req.Sort = fsmcpv1.ListingSort_LISTING_SORT_MTIME
	}
	var got []string
	for pages := 0; ; pages++ {
		if pages > len(want)+1 {
			t.Fatalf("glob %q %+v: more pages than paths", pattern, o)
		}
		oracleCalls["glob"]++
		msgs, err := workertest.Drain(c.Glob(context.Background(), req))
		if err != nil {
			t.Fatalf("glob %q %+v: %v", pattern, o, err)
		}
		last := msgs[len(msgs)-1].(*fsmcpv1.GlobResponse)
		if last.Total != int64(len(want)) || last.Errors != 0 {
			t.Errorf("glob %q %+v: total %d errors %d, want %d", pattern, o, last.Total, last.Errors, len(want))
		}
		paths := last.Paths
		if !byMtime {
			// The entries stand as in the reply's text: the inside of a
			// JSON string holding objects separated by commas.
			var doc string
			must(t, json.Unmarshal([]byte(`"`+string(last.EntriesJson)+`"`), &doc))
			var objs []struct {
				Path       *string `json:"path"`
				PathBase64 string  `json:"path_base64"`
			}
			must(t, json.Unmarshal([]byte("["+doc+"]"), &objs))
			if len(objs) != len(last.EntryEnds) {
				t.Fatalf("glob %q %+v: %d entries, %d ends", pattern, o, len(objs), len(last.EntryEnds))
			}
			paths = nil
			for _, obj := range objs {
				p := []byte(nil)
				if obj.Path != nil {
					p = []byte(*obj.Path)
				} else {
					var err error
					p, err = base64.StdEncoding.DecodeString(obj.PathBase64)
					must(t, err)
				}
				paths = append(paths, p)
			}
		}
		for _, p := range paths {
			got = append(got, string(p))
		}
		if !last.More {
			break
		}
		if len(paths) == 0 {
			t.Fatalf("glob %q %+v: an empty page with more", pattern, o)
		}
		req.After, req.HasAfter = paths[len(paths)-1], true
		if byMtime {
			req.AfterMtimeUnixNano = last.MtimesUnixNano[len(paths)-1]
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("glob %q depth %d mtime %v %+v: %s", pattern, depth, byMtime, o, lineDiff(got, want))
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkList compares fs_list of every directory, in each order, every
// page, with os.ReadDir and lstat; and its totals.
func checkList(t *testing.T, c fsmcpv1.WorkerServiceClient, ents []refEntry, rng *rand.Rand) {
	t.Helper()
	children := map[string][]refEntry{"": nil}
	for _, e := range ents {
		dir := parentOf(e.path)
		children[dir] = append(children[dir], e)
		if e.typ == fsmcpv1.FileType_FILE_TYPE_DIRECTORY {
			children[e.path] = append(children[e.path], []refEntry{}...)
		}
	}
	for dir, kids := range children {
		var totals fsmcpv1.ListTotals
		for _, k := range kids {
			if k.typ == fsmcpv1.FileType_FILE_TYPE_DIRECTORY {
				totals.Directories++
			} else {
				totals.Files++
				totals.Bytes += k.lsize
			}
		}
		for _, order := range []fsmcpv1.ListingSort{fsmcpv1.ListingSort_LISTING_SORT_PATH, fsmcpv1.ListingSort_LISTING_SORT_SIZE, fsmcpv1.ListingSort_LISTING_SORT_MTIME} {
			key := func(e refEntry) int64 { return 0 }
			switch order {
			case fsmcpv1.ListingSort_LISTING_SORT_SIZE:
				key = func(e refEntry) int64 { return e.lsize }
			case fsmcpv1.ListingSort_LISTING_SORT_MTIME:
				key = func(e refEntry) int64 { return e.mtime }
			}
			sorted := slices.Clone(kids)
			slices.SortStableFunc(sorted, func(a, b refEntry) int {
				if k := -cmpInt(key(a), key(b)); k != 0 {
					return k
				}
				return strings.Compare(filepath.Base(a.path), filepath.Base(b.path))
			})
			var want []string
			for _, e := range sorted {
				want = append(want, fmt.Sprintf("%q %v %d %d", filepath.Base(e.path), e.typ, e.lsize, e.mtime))
			}
			req := &fsmcpv1.ListRequest{Path: []byte(dir), Sort: order, Totals: rng.IntN(2) == 0, MaxBytes: int64(20 + rng.IntN(400))}
			var got []string
			for pages := 0; ; pages++ {
				if pages > len(want)+1 {
					t.Fatalf("list %q %v: more pages than entries", dir, order)
				}
				oracleCalls["list"]++
				resp, err := c.List(context.Background(), req)
				if err != nil {
					t.Fatalf("list %q %v: %v", dir, order, err)
				}
				if req.Totals && (resp.Totals.GetFiles() != totals.Files || resp.Totals.GetDirectories() != totals.Directories || resp.Totals.GetBytes() != totals.Bytes) {
					t.Errorf("list %q totals %v, want %v", dir, resp.Totals, &totals)
				}
				cols := resp.Columns
				start := uint32(0)
				for i, end := range cols.NameEnds {
					got = append(got, fmt.Sprintf("%q %v %d %d", cols.Names[start:end], cols.Types[i], cols.Sizes[i], cols.MtimesUnixNano[i]))
					req.After, req.HasAfter = bytes.Clone(cols.Names[start:end]), true
					req.AfterKey = cols.Sizes[i]
					if order == fsmcpv1.ListingSort_LISTING_SORT_MTIME {
						req.AfterKey = cols.MtimesUnixNano[i]
					}
					start = end
				}
				if !resp.More {
					break
				}
				if len(cols.NameEnds) == 0 {
					t.Fatalf("list %q %v: an empty page with more", dir, order)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("list %q %v:\n got %q\nwant %q", dir, order, got, want)
			}
		}
	}
}

// oracleGreps are fs_grep's searches in the suite.
var oracleGreps = []fsmcpv1.GrepRequest{
	{Pattern: "needle"}, {Pattern: "needle", IgnoreCase: true}, {Pattern: "ne edle", Literal: true},
	{Pattern: "needle", Context: 1}, {Pattern: "Needle", Before: 2}, {Pattern: "needle", After: 1, MaxCount: 1},
	{Pattern: "^$"}, {Pattern: "hay\\s+stack"}, {Pattern: "needle\\s+needle", Multiline: true}, {Pattern: "x", Globs: []string{"*.go"}},
	{Pattern: "needle", Output: fsmcpv1.GrepOutput_GREP_OUTPUT_FILES}, {Pattern: "a|e", Output: fsmcpv1.GrepOutput_GREP_OUTPUT_COUNT},
}

// rgJSON is the part of an rg --json message the suite compares.
type rgJSON struct {
	Type string `json:"type"`
	Data struct {
		Path       rgText `json:"path"`
		Lines      rgText `json:"lines"`
		LineNumber int64  `json:"line_number"`
		Offset     int64  `json:"absolute_offset"`
		Submatches []struct {
			Start int64 `json:"start"`
			End   int64 `json:"end"`
		} `json:"submatches"`
	} `json:"data"`
}

// rgText is rg's {"text":…} or {"bytes":…} (base64).
type rgText struct {
	Text  *string `json:"text"`
	Bytes string  `json:"bytes"`
}

func (r rgText) String() string {
	if r.Text != nil {
		return *r.Text
	}
	b, _ := base64.StdEncoding.DecodeString(r.Bytes)
	return string(b)
}

// checkGrep compares a search, in every output mode, every page, with rg
// --json (or --count) run directly.
func checkGrep(t *testing.T, c fsmcpv1.WorkerServiceClient, tr *oracleTree, o oracleOpts, rng *rand.Rand) {
	t.Helper()
	req := proto.Clone(&oracleGreps[rng.IntN(len(oracleGreps))]).(*fsmcpv1.GrepRequest)
	req.Hidden, req.NoIgnore, req.MaxBytes = o.hidden, o.noIgnore, int64(200+rng.IntN(2000))
	args := append(rgargs.Common(o.hidden, o.noIgnore), "--regexp="+req.Pattern)
	for _, g := range req.Globs {
		args = append(args, "--glob="+g)
	}
	for flag, on := range map[string]bool{"--fixed-strings": req.Literal, "--ignore-case": req.IgnoreCase, "--multiline": req.Multiline} {
		if on {
			args = append(args, flag)
		}
	}
	for flag, n := range map[string]int64{"--max-count": req.MaxCount, "--context": int64(req.Context), "--before-context": int64(req.Before), "--after-context": int64(req.After)} {
		if n > 0 {
			args = append(args, fmt.Sprintf("%s=%d", flag, n))
		}
	}
	byFile := req.Output != fsmcpv1.GrepOutput_GREP_OUTPUT_UNSPECIFIED
	var want []string
	cmd := exec.Command("rg", append(args, "--json", "--", ".")...)
	if byFile {
		cmd = exec.Command("rg", append(args, "--count", "--with-filename", "--null", "--", ".")...)
	}
	cmd.Dir = tr.root
	out, _ := cmd.Output()
	type line struct {
		path   string
		offset int64
		text   string
	}
	var lines []line
	if byFile {
		// "path NUL count NL", where a path may hold a newline.
		for rest := string(out); rest != ""; {
			p, tail, _ := strings.Cut(rest, "\x00")
			n, tail, _ := strings.Cut(tail, "\n")
			p = strings.TrimPrefix(p, "./")
			lines = append(lines, line{path: p, text: fmt.Sprintf("%q %s", p, n)})
			rest = tail
		}
	} else {
		for _, l := range bytes.Split(out, []byte("\n")) {
			var m rgJSON
			if len(l) == 0 {
				continue
			}
			must(t, json.Unmarshal(l, &m))
			if m.Type != "match" && m.Type != "context" {
				continue
			}
			p := strings.TrimPrefix(m.Data.Path.String(), "./")
			var subs []string
			for _, s := range m.Data.Submatches {
				subs = append(subs, fmt.Sprintf("%d-%d", s.Start, s.End))
			}
			lines = append(lines, line{p, m.Data.Offset, fmt.Sprintf("%q %d %d %q %v %v", p, m.Data.LineNumber, m.Data.Offset,
				strings.TrimRight(m.Data.Lines.String(), "\n"), subs, m.Type == "context")})
		}
	}
	slices.SortFunc(lines, func(a, b line) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return cmpInt(a.offset, b.offset)
	})
	for _, l := range lines {
		want = append(want, l.text)
	}
	var got []string
	for pages := 0; ; pages++ {
		if pages > len(want)+1 {
			t.Fatalf("grep %v: more pages than lines", req)
		}
		oracleCalls["grep"]++
		msgs, err := workertest.Drain(c.Grep(context.Background(), req))
		if err != nil {
			t.Fatalf("grep %v: %v", req, err)
		}
		last := msgs[len(msgs)-1].(*fsmcpv1.GrepResponse)
		n := len(got)
		for _, f := range last.Files {
			got = append(got, fmt.Sprintf("%q %d", f.Path, f.Count))
			req.AfterPath, req.HasAfter = f.Path, true
		}
		for _, l := range last.Lines {
			var subs []string
			for _, s := range l.Submatches {
				subs = append(subs, fmt.Sprintf("%d-%d", s.Start, s.End))
			}
			got = append(got, fmt.Sprintf("%q %d %d %q %v %v", l.Path, l.LineNumber, l.Offset, strings.TrimRight(string(l.Text), "\n"), subs, l.Context))
			req.AfterPath, req.AfterOffset, req.HasAfter = l.Path, l.Offset, true
		}
		if !last.More {
			break
		}
		if len(got) == n {
			t.Fatalf("grep %v: an empty page with more", req)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("grep %v: %s", req, lineDiff(got, want))
	}
}

// checkReadLines compares line windows of fs_read with the file split at its
// newlines.
func checkReadLines(t *testing.T, c fsmcpv1.WorkerServiceClient, tr *oracleTree, ents []refEntry, rng *rand.Rand) {
	t.Helper()
	for _, e := range ents {
		if e.typ != fsmcpv1.FileType_FILE_TYPE_FILE || rng.IntN(3) > 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(tr.root, e.path))
		must(t, err)
		lines := strings.SplitAfter(string(b), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) == 0 {
			continue
		}
		first := 1 + rng.IntN(len(lines))
		n := rng.IntN(4)
		line := int64(first)
		if rng.IntN(3) == 0 {
			line = int64(first - len(lines) - 1) // the same line, from the end
		}
		oracleCalls["read"]++
		resp, err := c.Read(context.Background(), &fsmcpv1.ReadRequest{Path: []byte(e.path), ByLine: true, Line: line, Lines: int64(n), Length: 1 << 20})
		if err != nil {
			t.Fatalf("read %q line %d: %v", e.path, line, err)
		}
		end := len(lines)
		if n > 0 {
			end = min(first-1+n, len(lines))
		}
		var ends []int64
		var at int64
		for _, l := range lines[first-1 : end] {
			at += int64(len(l))
			ends = append(ends, at)
		}
		want := fmt.Sprintf("%q %d %d %v", strings.Join(lines[first-1:end], ""), len(strings.Join(lines[:first-1], "")), first, ends)
		got := fmt.Sprintf("%q %d %d %v", resp.Data, resp.Offset, resp.FirstLine, resp.LineEnds)
		if got != want {
			t.Fatalf("read %q line %d lines %d:\n got %s\nwant %s", e.path, line, n, got, want)
		}
	}
}

// lineDiff says how got differs from want: the lines only one of them
// holds, or else that the order differs.
func lineDiff(got, want []string) string {
	count := map[string]int{}
	for _, l := range got {
		count[l]++
	}
	for _, l := range want {
		count[l]--
	}
	var b strings.Builder
	for _, l := range slices.Sorted(maps.Keys(count)) {
		if n := count[l]; n != 0 {
			fmt.Fprintf(&b, "\n  %+d %q", n, l)
		}
	}
	if b.Len() == 0 {
		return fmt.Sprintf("the same lines in another order:\n got %q\nwant %q", got, want)
	}
	return "lines got (+) and wanted (-):" + b.String()
}

// checkDigest compares fs_digest of the root and of a few directories
// with the Merkle hash its contract defines, computed over a plain walk.
func checkDigest(t *testing.T, c fsmcpv1.WorkerServiceClient, tr *oracleTree, ents []refEntry, rng *rand.Rand) {
	t.Helper()
	dirs := []string{""}
	for _, e := range ents {
		if e.typ == fsmcpv1.FileType_FILE_TYPE_DIRECTORY && rng.IntN(8) == 0 {
			dirs = append(dirs, e.path)
		}
	}
	for _, dir := range dirs {
		var n digestCounts
		sum := refDigest(t, tr.root, dir, &n)
		want := fmt.Sprintf("%x %d %d %d", sum, n.files, n.dirs, n.bytes)
		oracleCalls["digest"]++
		msgs, err := workertest.Drain(c.Digest(context.Background(), &fsmcpv1.DigestRequest{Path: []byte(dir)}))
		if err != nil {
			t.Fatalf("digest %q: %v", dir, err)
		}
		last := msgs[len(msgs)-1].(*fsmcpv1.DigestResponse)
		if got := fmt.Sprintf("%s %d %d %d", last.TreeSha256, last.Files, last.Directories, last.Bytes); got != want {
			t.Fatalf("digest %q: got %s, want %s; the directories that differ: %q", dir, got, want, digestDiffers(t, c, tr.root, ents))
		}
	}
}

// digestDiffers names each directory whose digest differs from the
// reference's, with its symlinks' targets.
func digestDiffers(t *testing.T, c fsmcpv1.WorkerServiceClient, root string, ents []refEntry) []string {
	var out []string
	for _, e := range ents {
		if e.typ != fsmcpv1.FileType_FILE_TYPE_DIRECTORY {
			continue
		}
		msgs, err := workertest.Drain(c.Digest(context.Background(), &fsmcpv1.DigestRequest{Path: []byte(e.path)}))
		if err != nil {
			t.Fatalf("digest %q: %v", e.path, err)
		}
		sum := refDigest(t, root, e.path, &digestCounts{})
		if msgs[len(msgs)-1].(*fsmcpv1.DigestResponse).TreeSha256 == fmt.Sprintf("%x", sum) {
			continue
		}
		d := e.path + ":"
		for _, l := range ents {
			if parentOf(l.path) == e.path && l.typ == fsmcpv1.FileType_FILE_TYPE_SYMLINK {
				target, _ := os.Readlink(filepath.Join(root, l.path))
				d += " " + filepath.Base(l.path) + " -> " + target
			}
		}
		out = append(out, d)
	}
	return out
}

type digestCounts struct{ files, dirs, bytes int64 }

// refDigest is the node hash of rel below root: sha256(type, mode, payload).
func refDigest(t *testing.T, root, rel string, n *digestCounts) [32]byte {
	p := filepath.Join(root, rel)
	var st syscall.Stat_t
	must(t, syscall.Lstat(p, &st))
	node := func(typ byte, mode uint32, payload []byte) [32]byte {
		return sha256.Sum256(append(binary.BigEndian.AppendUint32([]byte{typ}, mode), payload...))
	}
	mode := st.Mode & 0o7777
	switch fileType(st.Mode) {
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		b, err := os.ReadFile(p)
		must(t, err)
		n.files++
		n.bytes += int64(len(b))
		sum := sha256.Sum256(b)
		return node('f', mode, sum[:])
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		n.dirs++
		ds, err := os.ReadDir(p)
		must(t, err)
		var payload []byte
		for _, d := range ds { // ReadDir sorts by name
			sum := refDigest(t, root, filepath.Join(rel, d.Name()), n)
			payload = binary.BigEndian.AppendUint32(payload, uint32(len(d.Name())))
			payload = append(append(payload, d.Name()...), sum[:]...)
		}
		return node('d', mode, payload)
	case fsmcpv1.FileType_FILE_TYPE_SYMLINK:
		target, err := os.Readlink(p)
		must(t, err)
		if !linkInside(root, filepath.Dir(rel), target) {
			return node('l', 0, []byte{'e'})
		}
		return node('l', 0, append([]byte{'i'}, target...))
	}
	return node('o', mode, nil)
}

// linkInside reports whether target, a symlink's text in the directory
// dir (below root), stays inside root: followed one name at a time, with
// each symlink met on the way followed in turn, no ".." climbs above the
// root and no target is absolute. A name that is not there is taken as
// written; a loop leaves the text alone to decide.
func linkInside(root, dir, target string) bool {
	var at []string
	if dir != "." {
		at = strings.Split(dir, "/")
	}
	_, inside, loop := resolveIn(root, at, target, 0)
	if loop {
		j := filepath.Join(dir, target)
		return !filepath.IsAbs(target) && j != ".." && !strings.HasPrefix(j, "../")
	}
	return inside
}

// resolveIn follows target from the directory at (names below root) and
// returns where it leads, whether it stayed inside, and whether it met
// more than 40 symlinks.
func resolveIn(root string, at []string, target string, hops int) ([]string, bool, bool) {
	if hops > 40 {
		return nil, false, true
	}
	if filepath.IsAbs(target) {
		return nil, false, false
	}
	at = slices.Clone(at)
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return nil, false, false
			}
			at = at[:len(at)-1]
			continue
		}
		next, err := os.Readlink(filepath.Join(append([]string{root}, append(at, c)...)...))
		if err != nil {
			at = append(at, c)
			continue
		}
		var inside, loop bool
		if at, inside, loop = resolveIn(root, at, next, hops+1); !inside || loop {
			return nil, inside, loop
		}
	}
	return at, true, false
}

// parentOf is the directory of p below the target ("" for the target).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// depthOf is the depth of p below the target: 0 for the target, 1 for
// its entries.
func depthOf(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}
