package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	modelSeed  = flag.Uint64("model-seed", 20261130, "seed of TestModelMutations' operation sequence (0 picks one from the clock)")
	modelSteps = flag.Int("model-steps", 1500, "operations TestModelMutations applies")
)

// mnode is one entry of the model tree: a directory, or a regular file
// with its bytes; both with their permission bits.
type mnode struct {
	dir     bool
	mode    fs.FileMode
	content []byte
}

// fsModel is what the tree under the root must hold: every entry by its
// slash-separated path relative to the root, and the root itself as ".".
type fsModel map[string]*mnode

// comps splits a path as the client spelled it into its components.
func comps(spelled string) []string {
	return strings.Split(strings.TrimPrefix(spelled, "/"), "/")
}

// parentCode is the error the worker gives when the parent of the spelled
// path cannot be opened: a missing component is not_found, a file used as
// a directory is not_a_directory, whichever comes first walking down from
// the root. ".." goes back up from a directory that exists, as os.Root
// resolves it (the spellings never leave the root). A path that ends in "/"
// names no file: invalid_argument, before the parent is opened.
func (m fsModel) parentCode(spelled string) string {
	if strings.HasSuffix(spelled, "/") {
		return "invalid_argument"
	}
	c := comps(spelled)
	var stack []string
	for _, name := range c[:len(c)-1] {
		if name == ".." {
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, name)
		n := m[strings.Join(stack, "/")]
		switch {
		case n == nil:
			return "not_found"
		case !n.dir:
			return "not_a_directory"
		}
	}
	return ""
}

// subtree lists p and every entry below it.
func (m fsModel) subtree(p string) []string {
	var out []string
	for q := range m {
		if q == p || strings.HasPrefix(q, p+"/") {
			out = append(out, q)
		}
	}
	return out
}

func (m fsModel) hasChildren(p string) bool {
	for q := range m {
		if strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

func (m fsModel) move(from, to string) {
	moved := map[string]*mnode{}
	for _, q := range m.subtree(from) {
		moved[to+strings.TrimPrefix(q, from)] = m[q]
		delete(m, q)
	}
	for q, n := range moved {
		m[q] = n
	}
}

func (m fsModel) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if m[k].dir {
			fmt.Fprintf(&b, "  %s/ %04o\n", k, m[k].mode)
		} else {
			fmt.Fprintf(&b, "  %s %04o %q\n", k, m[k].mode, m[k].content)
		}
	}
	return b.String()
}

// diskTree reads the tree under root as it is on disk, root included:
// directories, and regular files with their bytes, with their permission
// bits. Anything else (a symlink, a fifo) is recorded as a file whose
// content is a marker, so it can never equal the model.
func diskTree(root string) (fsModel, error) {
	m := fsModel{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if p == root {
			rel = "."
		}
		switch {
		case d.IsDir():
			m[rel] = &mnode{dir: true, mode: mode}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = &mnode{content: b, mode: mode}
		default:
			m[rel] = &mnode{content: []byte("<not a regular file: " + d.Type().String() + ">")}
		}
		return nil
	})
	return m, err
}

// diffTrees describes how disk differs from want; "" when they are equal.
func diffTrees(want, disk fsModel) string {
	var lines []string
	for p, w := range want {
		d := disk[p]
		switch {
		case d == nil && w.dir:
			lines = append(lines, fmt.Sprintf("  missing on disk: directory %s", p))
		case d == nil:
			lines = append(lines, fmt.Sprintf("  missing on disk: file %s %q", p, w.content))
		case d.dir != w.dir:
			lines = append(lines, fmt.Sprintf("  %s: dir=%v on disk, dir=%v in the model", p, d.dir, w.dir))
		case !w.dir && !bytes.Equal(d.content, w.content):
			lines = append(lines, fmt.Sprintf("  %s: %q on disk, %q in the model", p, d.content, w.content))
		case d.mode != w.mode:
			lines = append(lines, fmt.Sprintf("  %s: mode %04o on disk, %04o in the model", p, d.mode, w.mode))
		}
	}
	for p, d := range disk {
		if want[p] == nil {
			if d.dir {
				lines = append(lines, fmt.Sprintf("  extra on disk: directory %s", p))
			} else {
				lines = append(lines, fmt.Sprintf("  extra on disk: %s %q", p, d.content))
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// modelOp is one tool call, the outcome the model predicts for it, and
// what it does to the model when that outcome comes (a failure may change
// the tree too: fs_mkdir keeps what it created before it stopped).
type modelOp struct {
	tool string
	args map[string]any
	// want is "" for success, else the error code.
	want string
	// check inspects a reply (success or failure) beyond its code; it
	// returns a complaint or "".
	check func(r reply) string
	apply func()
}

func (o *modelOp) String() string {
	b, _ := json.Marshal(o.args)
	want := o.want
	if want == "" {
		want = "ok"
	}
	return fmt.Sprintf("%s %s -> %s", o.tool, b, want)
}

// modelGen draws operations from a small namespace, so that collisions,
// missing and existing parents, non-empty directories, files used as
// directories and moves into a directory's own subtree come up often.
type modelGen struct {
	rng  *rand.Rand
	m    fsModel
	root string
}

var modelNames = []string{"a", "b", "c"}

func (g *modelGen) pct(n int) bool { return g.rng.IntN(100) < n }

func (g *modelGen) name() string { return modelNames[g.rng.IntN(len(modelNames))] }

// freshPath is a random path of depth 1 to 3 in the namespace.
func (g *modelGen) freshPath() string {
	c := make([]string, 1+g.rng.IntN(3))
	for i := range c {
		c[i] = g.name()
	}
	return strings.Join(c, "/")
}

// existing picks an entry of the model (never the root) that satisfies
// keep, or "".
func (g *modelGen) existing(keep func(*mnode) bool) string {
	var c []string
	for p, n := range g.m {
		if p != "." && keep(n) {
			c = append(c, p)
		}
	}
	if len(c) == 0 {
		return ""
	}
	slices.Sort(c) // map order is random; the draw must be reproducible
	return c[g.rng.IntN(len(c))]
}

func anyNode(*mnode) bool     { return true }
func isFile(n *mnode) bool    { return !n.dir }
func isDirNode(n *mnode) bool { return n.dir }

// path picks an existing entry of the kind keep accepts with probability
// pExisting percent, a new name in an existing directory with probability
// pChild, else a fresh path.
func (g *modelGen) path(pExisting, pChild int, keep func(*mnode) bool) string {
	r := g.rng.IntN(100)
	if r < pExisting {
		if p := g.existing(keep); p != "" {
			return p
		}
	}
	if r < pExisting+pChild {
		if d := g.existing(isDirNode); d != "" {
			return d + "/" + g.name()
		}
	}
	return g.freshPath()
}

// spell is how the client writes p: mostly as it is, sometimes with the
// leading slash the contract strips, sometimes with a detour "x/.." that
// os.Root resolves (and that fails if x is not a directory), and now and
// then with a trailing slash, which the tools that act on one name refuse.
func (g *modelGen) spell(p string, detour bool) string {
	if g.pct(2) {
		return g.spellPlain(p, detour) + "/"
	}
	return g.spellPlain(p, detour)
}

func (g *modelGen) spellPlain(p string, detour bool) string {
	if detour && g.pct(8) {
		c := strings.Split(p, "/")
		i := g.rng.IntN(len(c))
		p = strings.Join(slices.Concat(c[:i], []string{g.name(), ".."}, c[i:]), "/")
	}
	if g.pct(5) {
		return "/" + p
	}
	return p
}

// content is a short byte string from a tiny alphabet (so edits match, and
// match several times), sometimes with bytes that are not UTF-8.
func (g *modelGen) content(minLen, maxLen int) []byte {
	alphabet := "xy\n"
	if g.pct(20) {
		alphabet = "xy\n\x00\xff\r"
	}
	b := make([]byte, minLen+g.rng.IntN(maxLen-minLen+1))
	for i := range b {
		b[i] = alphabet[g.rng.IntN(len(alphabet))]
	}
	return b
}

// precondition picks if_sha256 for a write to p: usually the right one,
// sometimes null, sometimes wrong. It returns the JSON value and whether
// it is malformed (refused before the worker).
func (g *modelGen) precondition(p string) (any, bool) {
	n := g.m[p]
	switch r := g.rng.IntN(100); {
	case r < 3:
		// Upper-case hex is not the contract's form.
		return strings.ToUpper(sha(g.content(0, 4))), true
	case n != nil && !n.dir && r < 80:
		return sha(n.content), false
	case n == nil && r < 75:
		return nil, false
	case r < 88:
		return nil, false
	default:
		// 'z' is not in the alphabet: no file has this content.
		return sha(append(g.content(0, 6), 'z')), false
	}
}

// next draws one operation and predicts its outcome from the model.
func (g *modelGen) next() *modelOp {
	switch r := g.rng.IntN(100); {
	case r < 20:
		return g.write()
	case r < 34:
		return g.replace()
	case r < 45:
		return g.mkdir()
	case r < 61:
		return g.move()
	case r < 72:
		return g.del()
	case r < 75:
		return g.chmod()
	case r < 81:
		return g.appendOp()
	case r < 88:
		return g.spliceOp()
	case r < 91:
		return g.copyOp()
	case r < 93:
		return g.charsetWriteOp()
	case r < 95:
		return g.eolReplaceOp()
	default:
		return g.patchOp()
	}
}

func (g *modelGen) write() *modelOp {
	m := g.m
	p := g.path(40, 30, isFile)
	if g.pct(10) {
		p = g.path(100, 0, isDirNode)
	}
	spelled := g.spell(p, true)
	content := g.content(0, 12)
	args := map[string]any{"path": spelled}
	switch {
	case !isText(content) || g.pct(20):
		args["content"] = base64.StdEncoding.EncodeToString(content)
		args["encoding"] = "base64"
	case g.pct(10):
		args["content"] = string(content)
		args["encoding"] = "utf8"
	default:
		args["content"] = string(content)
	}
	ifSHA, malformed := g.precondition(p)
	args["if_sha256"] = ifSHA
	op := &modelOp{tool: "fs_write", args: args}
	if g.refusedEdit(op, p, spelled, ifSHA, malformed) {
		return op
	}
	created := m[p] == nil
	op.check = func(r reply) string {
		if r.str("sha256") != sha(content) || r.num("size") != int64(len(content)) || r.doc["created"] != created {
			return fmt.Sprintf("want sha256 %s, size %d, created %v", sha(content), len(content), created)
		}
		return ""
	}
	op.apply = g.setFile(p, content)
	return op
}

// destination draws where a move or copy of from goes: with cumulative
// percentages into, onto and self, into an existing directory (maybe
// from's own, maybe below it), onto an existing entry, into from itself;
// otherwise a fresh path.
func (g *modelGen) destination(from string, into, onto, self int) string {
	switch r := g.rng.IntN(100); {
	case r < into:
		return g.path(0, 100, anyNode)
	case r < onto:
		return g.path(100, 0, anyNode)
	case r < self:
		return from + "/" + g.name()
	}
	return g.freshPath()
}

// dirOf is the model path of p's parent directory, "" for the root.
func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// refusedEdit predicts the refusals every edit of the one file p (spelled
// spelled) with precondition ifSHA shares, in the order the server makes
// them, into op; it reports whether there was one.
func (g *modelGen) refusedEdit(op *modelOp, p, spelled string, ifSHA any, malformed bool) bool {
	m := g.m
	n := m[p]
	switch {
	case malformed:
		op.want = "invalid_argument"
	case m.parentCode(spelled) != "":
		op.want = m.parentCode(spelled)
	case n != nil && n.dir:
		op.want = "is_a_directory"
	case n == nil && ifSHA != nil:
		op.want, op.check = "precondition_failed", wantCurrent("")
	case n != nil && (ifSHA == nil || ifSHA != sha(n.content)):
		op.want, op.check = "precondition_failed", wantCurrent(sha(n.content))
	default:
		return false
	}
	return true
}

// setFile applies an edit that leaves content at p: a new file is 0644
// whatever the umask; an existing one keeps its mode, only its bytes
// change.
func (g *modelGen) setFile(p string, content []byte) func() {
	return func() {
		if n := g.m[p]; n != nil {
			n.content = content
		} else {
			g.m[p] = &mnode{mode: 0o644, content: content}
		}
	}
}

// wantCurrent checks the current_sha256 of a precondition_failed reply:
// the file's hash when it exists, absent when it does not.
func wantCurrent(cur string) func(reply) string {
	return func(r reply) string {
		e, _ := r.doc["error"].(map[string]any)
		got, _ := e["current_sha256"].(string)
		if got != cur {
			return fmt.Sprintf("current_sha256 %q, want %q", got, cur)
		}
		return ""
	}
}

func (g *modelGen) replace() *modelOp {
	m := g.m
	p := g.path(85, 5, isFile)
	spelled := g.spell(p, true)
	cur := []byte{}
	if n := m[p]; n != nil && !n.dir {
		cur = n.content
	}
	type edit struct {
		old, new []byte
		all      bool
	}
	edits := make([]edit, 1+g.rng.IntN(3))
	for i := range edits {
		e := &edits[i]
		if len(cur) > 0 && g.pct(60) {
			// A piece of the file as it was: it may be unique, repeated,
			// or gone after an earlier edit.
			start := g.rng.IntN(len(cur))
			end := start + 1 + g.rng.IntN(min(3, len(cur)-start))
			e.old = bytes.Clone(cur[start:end])
		} else {
			e.old = g.content(1, 3)
		}
		if g.pct(1) {
			e.old = nil
		}
		e.new = g.content(0, 4)
		e.all = g.pct(30)
	}
	binary := false
	for _, e := range edits {
		binary = binary || !isText(e.old) || !isText(e.new)
	}
	enc := func(b []byte) string {
		if binary {
			return base64.StdEncoding.EncodeToString(b)
		}
		return string(b)
	}
	var jsonEdits []any
	for _, e := range edits {
		je := map[string]any{"old": enc(e.old), "new": enc(e.new)}
		if e.all || g.pct(10) {
			je["all"] = e.all
		}
		jsonEdits = append(jsonEdits, je)
	}
	args := map[string]any{"path": spelled, "edits": jsonEdits}
	if binary {
		args["encoding"] = "base64"
	}
	ifSHA, malformed := g.precondition(p)
	args["if_sha256"] = ifSHA
	op := &modelOp{tool: "fs_replace", args: args}
	n := m[p]
	emptyOld := slices.ContainsFunc(edits, func(e edit) bool { return len(e.old) == 0 })
	switch {
	case emptyOld || malformed:
		op.want = "invalid_argument"
		return op
	case m.parentCode(spelled) != "":
		op.want = m.parentCode(spelled)
		return op
	case n != nil && n.dir:
		op.want = "is_a_directory"
		return op
	case n == nil && ifSHA == nil:
		// Null means "must not exist", which leaves nothing to edit: the
		// worker answers not_found (the contract does not say).
		op.want = "not_found"
		return op
	case n == nil:
		op.want = "precondition_failed"
		op.check = wantCurrent("")
		return op
	case ifSHA == nil || ifSHA != sha(n.content):
		op.want = "precondition_failed"
		op.check = wantCurrent(sha(n.content))
		return op
	}
	data := bytes.Clone(n.content)
	var total int64
	for _, e := range edits {
		c := bytes.Count(data, e.old)
		switch {
		case c == 0:
			op.want = "no_match"
			return op
		case c > 1 && !e.all:
			op.want = "ambiguous_match"
			op.check = func(r reply) string {
				e, _ := r.doc["error"].(map[string]any)
				if got, _ := e["count"].(float64); int(got) != c {
					return fmt.Sprintf("count %v, want %d", e["count"], c)
				}
				return ""
			}
			return op
		}
		data = bytes.ReplaceAll(data, e.old, e.new)
		total += int64(c)
	}
	op.check = func(r reply) string {
		if r.str("sha256") != sha(data) || r.num("size") != int64(len(data)) || r.num("replacements") != total {
			return fmt.Sprintf("want sha256 %s, size %d, replacements %d", sha(data), len(data), total)
		}
		return ""
	}
	op.apply = func() { n.content = data }
	return op
}

// isText reports whether b can travel as a JSON string unchanged and
// readable: valid UTF-8 without NUL or CR.
func isText(b []byte) bool {
	return !bytes.ContainsAny(b, "\x00\r") && strings.ToValidUTF8(string(b), "\uFFFD") == string(b)
}

func (g *modelGen) mkdir() *modelOp {
	m := g.m
	if g.pct(3) {
		// The root is an existing directory: success.
		return &modelOp{tool: "fs_mkdir", args: map[string]any{"path": []string{"", ".", "/"}[g.rng.IntN(3)]},
			check: func(r reply) string {
				if r.doc["created"] != false {
					return "created the root"
				}
				return ""
			}}
	}
	p := g.path(25, 35, anyNode)
	spelled := g.spellPlain(p, true)
	if g.pct(5) {
		// A directory may be named with a trailing slash.
		spelled += "/"
	}
	op := &modelOp{tool: "fs_mkdir", args: map[string]any{"path": spelled}}
	// Walk the spelled path as MkdirAll does: each missing component is
	// created (a detour's too), a file in the way stops the walk, and what
	// was created before it stays.
	var missing []string
	var stack []string
	c := comps(strings.TrimSuffix(spelled, "/"))
	for i, name := range c {
		if name == ".." {
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, name)
		q := strings.Join(stack, "/")
		n := m[q]
		switch {
		case n == nil && slices.Contains(missing, q):
		case n == nil:
			missing = append(missing, q)
		case !n.dir && i == len(c)-1:
			op.want = "already_exists"
		case !n.dir:
			op.want = "not_a_directory"
		}
		if op.want != "" {
			break
		}
	}
	op.apply = func() {
		for _, q := range missing {
			m[q] = &mnode{dir: true, mode: 0o755}
		}
	}
	if op.want == "" {
		created := m[p] == nil
		op.check = func(r reply) string {
			if r.doc["created"] != created {
				return fmt.Sprintf("want created %v", created)
			}
			return ""
		}
	}
	return op
}

func (g *modelGen) move() *modelOp {
	m := g.m
	from := g.path(85, 0, anyNode)
	to := g.destination(from, 40, 55, 63)
	sFrom, sTo := g.spell(from, true), g.spell(to, true)
	op := &modelOp{tool: "fs_move", args: map[string]any{"from": sFrom, "to": sTo}}
	src := m[from]
	toDir := dirOf(to)
	switch {
	case m.parentCode(sFrom) != "":
		op.want = m.parentCode(sFrom)
	case m.parentCode(sTo) != "":
		op.want = m.parentCode(sTo)
	case src == nil:
		op.want = "not_found"
	case src.dir && (toDir == from || strings.HasPrefix(toDir, from+"/")):
		op.want = "invalid_argument"
	case m[to] != nil:
		op.want = "already_exists"
	default:
		op.apply = func() { m.move(from, to) }
	}
	return op
}

func (g *modelGen) del() *modelOp {
	m := g.m
	if g.pct(2) {
		// The contract refuses the root; the worker says invalid_argument.
		return &modelOp{tool: "fs_delete", args: map[string]any{"path": []string{"", ".", "/"}[g.rng.IntN(3)], "recursive": true},
			want: "invalid_argument"}
	}
	p := g.path(80, 5, anyNode)
	spelled := g.spell(p, true)
	args := map[string]any{"path": spelled}
	recursive := g.pct(35)
	if recursive || g.pct(30) {
		args["recursive"] = recursive
	}
	op := &modelOp{tool: "fs_delete", args: args}
	n := m[p]
	switch {
	case m.parentCode(spelled) != "":
		op.want = m.parentCode(spelled)
	case n == nil:
		op.want = "not_found"
	case n.dir && m.hasChildren(p) && !recursive:
		op.want = "not_empty"
	default:
		gone := m.subtree(p)
		op.check = func(r reply) string {
			if r.num("removed") != int64(len(gone)) {
				return fmt.Sprintf("want removed %d", len(gone))
			}
			return ""
		}
		op.apply = func() {
			for _, q := range gone {
				delete(m, q)
			}
		}
	}
	return op
}

// chmod changes an entry's mode behind the server's back, as another
// program would, so that the writes' preservation of modes, and the
// directories fs_mkdir must leave alone, are put to the test. The root is
// one of the candidates.
func (g *modelGen) chmod() *modelOp {
	p := g.existing(anyNode)
	if p == "" || g.pct(20) {
		p = "."
	}
	n := g.m[p]
	modes := []fs.FileMode{0o600, 0o640, 0o664, 0o644, 0o660}
	if n.dir {
		modes = []fs.FileMode{0o700, 0o750, 0o755, 0o770, 0o711}
	}
	mode := modes[g.rng.IntN(len(modes))]
	return &modelOp{tool: "chmod", args: map[string]any{"path": p, "mode": fmt.Sprintf("%04o", mode)},
		apply: func() { n.mode = mode }}
}

// TestModelMutations applies a seeded random sequence of fs_write,
// fs_replace, fs_mkdir, fs_move and fs_delete both to a real server and to
// an in-memory model of the tree. Every outcome must be the one the model
// predicts from the contract (success, or the exact error code), and after
// every step the tree on disk must be the model exactly: the same
// directories and regular files, the same bytes, the same modes, and
// nothing else (no temp file left behind).
func TestModelMutations(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	steps := *modelSteps
	t.Logf("seed %d, %d steps (rerun with -run TestModelMutations -model-seed=%d -model-steps=%d)", seed, steps, seed, steps)
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	// The server inherits a umask that would eat group and other bits:
	// what it creates must still be 0644 and 0755.
	old := syscall.Umask(0o077)
	s := start(t, root)
	syscall.Umask(old)
	g := &modelGen{rng: rand.New(rand.NewPCG(seed, 0x6d6f64656c)), m: fsModel{".": {dir: true, mode: 0o700}}, root: root}
	const keep = 8
	var recent []string
	counts := map[string]int{}
	fail := func(step int, op *modelOp, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, step %d: %s\n%s\nlast operations (oldest first):\n  %s\nmodel before this step's change:\n%s",
			seed, step, op, fmt.Sprintf(format, args...), strings.Join(recent, "\n  "), g.m)
	}
	for step := range steps {
		op := g.next()
		want := op.want
		if want == "" {
			want = "ok"
		}
		if op.tool == "chmod" {
			mode, _ := strconv.ParseUint(op.args["mode"].(string), 8, 32)
			if err := os.Chmod(filepath.Join(root, op.args["path"].(string)), fs.FileMode(mode)); err != nil {
				t.Fatal(err)
			}
		} else {
			r := s.call(op.tool, op.args)
			got := "ok"
			if r.isError {
				got = r.code()
			}
			if got != want {
				fail(step, op, "server: %s\nreply: %.1000s", got, r.text)
			}
			if op.check != nil {
				if msg := op.check(r); msg != "" {
					fail(step, op, "%s\nreply: %.1000s", msg, r.text)
				}
			}
		}
		if op.apply != nil {
			op.apply()
		}
		counts[op.tool+" "+want]++
		recent = append(recent, fmt.Sprintf("%d: %s", step, op))
		if len(recent) > keep {
			recent = recent[1:]
		}
		disk, err := diskTree(root)
		if err != nil {
			fail(step, op, "walking the root: %v", err)
		}
		if d := diffTrees(g.m, disk); d != "" {
			fail(step, op, "the tree on disk is not the model:\n%s", d)
		}
	}
	var lines []string
	for k, v := range counts {
		lines = append(lines, fmt.Sprintf("%5d %s", v, k))
	}
	slices.Sort(lines)
	t.Logf("outcomes:\n%s\nfinal tree: %d entries", strings.Join(lines, "\n"), len(g.m)-1)
}
