package worker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/workertest"
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

// oracleTree is a generated tree.
type oracleTree struct {
	root string
	// depth is the depth of its deepest entry.
	depth int
}

// genTree writes a tree from rng below root (which exists).
func genTree(t testing.TB, rng *rand.Rand, root string) *oracleTree {
	tr := &oracleTree{root: root}
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
	n := rng.IntN(6)
	if rng.IntN(12) == 0 {
		n = 30 + rng.IntN(30) // wide
	}
	used := map[string]bool{}
	for range n {
		name := oracleNames[rng.IntN(len(oracleNames))]
		if rng.IntN(3) == 0 {
			name += fmt.Sprint(rng.IntN(4))
		}
		if used[name] {
			continue
		}
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
		e := refEntry{path: rel, typ: fileType(st.Mode), mtime: st.Mtim.Nano(), depth: strings.Count(rel, "/") + 1}
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
	args := commonArgs(o.hidden, o.noIgnore)
	for _, g := range o.excludes {
		args = append(args, "--glob=!"+g)
	}
	return args
}

// kept returns, for options o, which entries rg keeps: it builds the
// tree's shadow once and asks rg --files about it.
func (tr *oracleTree) kept(t testing.TB, ents []refEntry, o oracleOpts) func(refEntry) bool {
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
	for _, p := range rgList(t, shadow, append(o.args(), "--files")...) {
		listed[p] = true
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
	s := newSearchService(t, Limits{})
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	tr := genTree(t, rng, s.testDir)
	return tr, serveInProcess(t, s.Service)
}

// checkOracle compares every search of one tree with the reference.
func checkOracle(t *testing.T, seed uint64) {
	tr, c := oracleService(t, seed)
	rng := rand.New(rand.NewPCG(seed^0x5eed, 7))
	ents := tr.walk(t)
	opts := []oracleOpts{{}, {hidden: true}, {noIgnore: true}, {hidden: true, noIgnore: true}}
	for range 2 {
		o := oracleOpts{hidden: rng.IntN(2) == 0, noIgnore: rng.IntN(3) == 0}
		for range 1 + rng.IntN(2) {
			o.excludes = append(o.excludes, oracleExcludes[rng.IntN(len(oracleExcludes))])
		}
		opts = append(opts, o)
	}
	for _, o := range opts {
		kept := tr.kept(t, ents, o)
		for depth := 1; depth <= min(tr.depth+1, maxTreeDepth); depth++ {
			checkTree(t, c, ents, kept, o, depth, int64(100+rng.IntN(2000)))
		}
	}
}

// checkTree compares fs_tree at depth, every page of max bytes, with the
// walk's entries that rg keeps.
func checkTree(t *testing.T, c fsmcpv1.WorkerServiceClient, ents []refEntry, kept func(refEntry) bool, o oracleOpts, depth int, maxBytes int64) {
	t.Helper()
	var want []string
	for i, e := range ents {
		if e.depth > depth || !kept(e) {
			continue
		}
		l := fmt.Sprintf("%q %v %d", e.path, e.typ, e.size)
		if e.typ == fsmcpv1.FileType_FILE_TYPE_DIRECTORY && e.depth == depth {
			for _, c := range ents[i+1:] {
				if !strings.HasPrefix(c.path, e.path+"/") {
					break
				}
				if c.depth == depth+1 && kept(c) {
					l += " more"
					break
				}
			}
		}
		want = append(want, l)
	}
	req := &fsmcpv1.TreeRequest{MaxDepth: int32(depth), Hidden: o.hidden, NoIgnore: o.noIgnore, Excludes: o.excludes, MaxBytes: maxBytes}
	var got []string
	for pages := 0; ; pages++ {
		if pages > len(want)+1 {
			t.Fatalf("tree %+v depth %d: more pages than entries", o, depth)
		}
		msgs, err := workertest.Drain(c.Tree(context.Background(), req))
		if err != nil {
			t.Fatalf("tree %+v depth %d: %v", o, depth, err)
		}
		last := msgs[len(msgs)-1].(*fsmcpv1.TreeResponse)
		if last.Total != int64(len(want)) || last.Errors != 0 {
			t.Errorf("tree %+v depth %d page %d: total %d errors %d, want %d", o, depth, pages, last.Total, last.Errors, len(want))
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
			t.Fatalf("tree %+v depth %d: an empty page with more", o, depth)
		}
		req.After, req.HasAfter = last.Entries[len(last.Entries)-1].Path, true
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tree %+v depth %d:\n got %s\nwant %s", o, depth, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
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
	}
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

// Unused until the search checks decode them.
var _ = base64.StdEncoding
var _ = json.Unmarshal
