package worker

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// replayRepo makes a git repository of random commits: files created in
// new and existing directories, changed line by line, deleted (at times
// every file of a directory), renamed (as a delete and a create: the
// diffs are taken with --no-renames), with LF or CRLF line endings, with
// or without a final newline, with bytes that are not UTF-8, created
// executable; now and then a binary file and a mode change.
type replayRepo struct {
	t     *testing.T
	rng   *rand.Rand
	dir   string
	files map[string]bool // the tree's regular files
	next  int             // for fresh names
}

func (r *replayRepo) git(args ...string) []byte {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.autocrlf=false", "-c", "core.filemode=true",
		"-c", "user.name=replay", "-c", "user.email=replay@example.com"}, args...)...)
	cmd.Dir = r.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

func (r *replayRepo) fresh(prefix string) string {
	r.next++
	return prefix + strconv.Itoa(r.next)
}

// text is a file's content: lines mostly unique (so that hunks are not
// ambiguous), some blank or repeated, CRLF in one file of four, a line
// that is not UTF-8 in one of four, no final newline in one of five.
func (r *replayRepo) text() []byte {
	eol := "\n"
	if r.rng.IntN(4) == 0 {
		eol = "\r\n"
	}
	var b bytes.Buffer
	for range r.rng.IntN(40) {
		b.Write(r.line())
		b.WriteString(eol)
	}
	if b.Len() > 0 && r.rng.IntN(5) == 0 {
		b.Truncate(b.Len() - len(eol))
	}
	return b.Bytes()
}

func (r *replayRepo) line() []byte {
	switch r.rng.IntN(12) {
	case 0:
		return nil
	case 1:
		return []byte("}")
	case 2:
		return []byte(fmt.Sprintf("caf\xe9 \xff\xfe %08x", r.rng.Uint32()))
	}
	return []byte(fmt.Sprintf("\tline %08x of the file", r.rng.Uint32()))
}

// edit changes a few lines of data, keeping its line ending.
func (r *replayRepo) edit(data []byte) []byte {
	eol := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		eol = "\r\n"
	}
	lines := strings.SplitAfter(string(data), "\n")
	for range 1 + r.rng.IntN(4) {
		at := r.rng.IntN(len(lines) + 1)
		switch r.rng.IntN(3) {
		case 0:
			lines = slices.Insert(lines, at, string(r.line())+eol)
		case 1:
			if at < len(lines) {
				lines = slices.Delete(lines, at, at+1)
			}
		default:
			if at < len(lines) {
				lines[at] = string(r.line()) + eol
			}
		}
	}
	out := strings.Join(lines, "")
	if r.rng.IntN(8) == 0 {
		// The final newline comes or goes.
		if t, ok := strings.CutSuffix(out, eol); ok {
			out = t
		} else {
			out += eol
		}
	}
	return []byte(out)
}

func (r *replayRepo) pick(binary bool) string {
	var names []string
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range r.files {
			if !yield(n) {
				return
			}
		}
	}) {
		if strings.HasSuffix(n, ".bin") == binary {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return names[r.rng.IntN(len(names))]
}

// newPath is a fresh file name in an existing directory or in one to
// three new ones.
func (r *replayRepo) newPath(ext string) string {
	dir := "."
	if n := r.pick(false); n != "" && r.rng.IntN(2) == 0 {
		dir = path.Dir(n)
	}
	if r.rng.IntN(2) == 0 {
		for range 1 + r.rng.IntN(3) {
			dir = path.Join(dir, r.fresh("d"))
		}
	}
	return path.Join(dir, r.fresh("f")+ext)
}

func (r *replayRepo) write(name string, data []byte, mode os.FileMode) {
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		r.t.Fatal(err)
	}
	r.files[name] = true
}

func (r *replayRepo) remove(name string) {
	if err := os.Remove(filepath.Join(r.dir, name)); err != nil {
		r.t.Fatal(err)
	}
	delete(r.files, name)
}

// commit makes one random commit.
func (r *replayRepo) commit(n int) {
	for range 1 + r.rng.IntN(4) {
		switch op := r.rng.IntN(100); {
		case op < 25 || len(r.files) < 3:
			mode := os.FileMode(0o644)
			if r.rng.IntN(10) == 0 {
				mode = 0o755
			}
			r.write(r.newPath(".txt"), r.text(), mode)
		case op < 65:
			if n := r.pick(false); n != "" {
				data, _ := os.ReadFile(filepath.Join(r.dir, n))
				fi, _ := os.Stat(filepath.Join(r.dir, n))
				r.write(n, r.edit(data), fi.Mode().Perm())
			}
		case op < 75:
			if n := r.pick(false); n != "" {
				r.remove(n)
			}
		case op < 80:
			// Every file of a directory: the directory goes.
			if n := r.pick(false); n != "" && path.Dir(n) != "." {
				for m := range r.files {
					if strings.HasPrefix(m, path.Dir(n)+"/") {
						r.remove(m)
					}
				}
			}
		case op < 90:
			if n := r.pick(false); n != "" {
				data, _ := os.ReadFile(filepath.Join(r.dir, n))
				r.remove(n)
				r.write(r.newPath(".txt"), data, 0o644)
			}
		case op < 94:
			name := r.pick(true)
			if name == "" || r.rng.IntN(2) == 0 {
				name = r.newPath(".bin")
			}
			r.write(name, append([]byte{0, 1, 2, 0xff}, r.text()...), 0o644)
		default:
			if n := r.pick(false); n != "" {
				fi, _ := os.Stat(filepath.Join(r.dir, n))
				if err := os.Chmod(filepath.Join(r.dir, n), fi.Mode().Perm()^0o111); err != nil {
					r.t.Fatal(err)
				}
			}
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", fmt.Sprintf("commit %d", n))
}

// checkout writes commit rev's tree, as git archive gives it, into dir
// (emptied first).
func (r *replayRepo) checkout(rev, dir string) {
	r.t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	tar := r.git("-c", "tar.umask=022", "archive", "--format=tar", rev)
	cmd := exec.Command("tar", "-x", "-p", "-C", dir)
	cmd.Stdin = bytes.NewReader(tar)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("tar: %v\n%s", err, out)
	}
}

// replayTree describes a tree byte for byte: every directory, and every
// file with its permission bits and content.
func replayTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case rel == ".":
		case d.IsDir():
			m[rel] = "dir"
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("%o %q", fi.Mode().Perm(), b)
		default:
			m[rel] = "other " + fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func treeDiff(got, want map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			yield(k)
		}
		for k := range want {
			if _, ok := got[k]; !ok {
				yield(k)
			}
		}
	}) {
		if got[k] != want[k] {
			fmt.Fprintf(&b, "  %s: got %.80s, want %.80s\n", k, got[k], want[k])
		}
	}
	return b.String()
}

// replayCounts is what a replay did.
type replayCounts struct {
	commits, applied, empty, binary, modes                  int
	created, changed, deleted, hunks, dirsMade, dirsRemoved int
}

// replay replays commits random commits (from seed) through the worker's
// Patch: each git diff of consecutive commits goes first as a dry run
// without preconditions, then for real with the hashes the dry run
// answered, and the root must then equal git's checkout of the commit,
// byte for byte, modes and directories included. A diff with a binary
// file or a mode change must be refused as unsupported, by the dry run
// and the real call, with the tree untouched; the root is then brought
// to the commit from git.
func replay(t *testing.T, seed uint64, commits int) replayCounts {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	r := &replayRepo{t: t, rng: rand.New(rand.NewPCG(seed, 25)), dir: t.TempDir(), files: map[string]bool{}}
	r.git("init", "-q")
	r.git("commit", "-q", "--allow-empty", "-m", "empty")
	s, root := newWriteService(t)
	want := t.TempDir()
	ctx := context.Background()
	var c replayCounts
	for i := range commits {
		r.commit(i)
		c.commits++
		patch := r.git("diff", "--no-renames", "--no-color", "--no-ext-diff", "HEAD~1", "HEAD")
		before := replayTree(t, root)
		if len(patch) == 0 {
			c.empty++
			continue
		}
		resp, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: patch, DryRun: true})
		binary := bytes.Contains(patch, []byte("\nBinary files "))
		mode := bytes.Contains(patch, []byte("\nold mode "))
		if binary || mode {
			wantWriteCode(t, fmt.Sprintf("commit %d: the dry run", i), err, fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED)
			_, err = s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: patch})
			wantWriteCode(t, fmt.Sprintf("commit %d: the patch", i), err, fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED)
			if d := treeDiff(replayTree(t, root), before); d != "" {
				t.Fatalf("commit %d: a refused patch changed the tree:\n%s", i, d)
			}
			if binary {
				c.binary++
			} else {
				c.modes++
			}
			r.checkout("HEAD", root)
			continue
		}
		if err != nil {
			t.Fatalf("commit %d: the dry run: %v\n%s", i, err, patch)
		}
		if d := treeDiff(replayTree(t, root), before); d != "" {
			t.Fatalf("commit %d: the dry run changed the tree:\n%s", i, d)
		}
		var pre []*fsmcpv1.PatchPrecondition
		for _, f := range resp.GetFiles() {
			pre = append(pre, &fsmcpv1.PatchPrecondition{Path: f.GetPath(), Sha256: f.GetCurrentSha256(), MustNotExist: f.GetCreated()})
			switch {
			case f.GetCreated():
				c.created++
			case f.GetDeleted():
				c.deleted++
			default:
				c.changed++
			}
			c.hunks += int(f.GetHunks())
		}
		if _, err := s.Patch(ctx, &fsmcpv1.PatchRequest{Patch: patch, Preconditions: pre}); err != nil {
			t.Fatalf("commit %d: %v\n%s", i, err, patch)
		}
		c.applied++
		r.checkout("HEAD", want)
		after := replayTree(t, root)
		if d := treeDiff(after, replayTree(t, want)); d != "" {
			t.Fatalf("commit %d: the tree differs from git's checkout:\n%s\npatch:\n%s", i, d, patch)
		}
		for k, v := range after {
			if _, ok := before[k]; !ok && v == "dir" {
				c.dirsMade++
			}
		}
		for k, v := range before {
			if _, ok := after[k]; !ok && v == "dir" {
				c.dirsRemoved++
			}
		}
	}
	noTempLeft(t, root)
	return c
}

// TestPatchReplayHistory replays a bounded random history through fs_patch
// (see replay); scripts/replay runs a longer one. FSMCP_REPLAY_COMMITS and
// FSMCP_REPLAY_SEED set the number of commits and the seed.
func TestPatchReplayHistory(t *testing.T) {
	commits, seed := 40, uint64(1)
	if v, err := strconv.Atoi(os.Getenv("FSMCP_REPLAY_COMMITS")); err == nil {
		commits = v
	}
	if v, err := strconv.ParseUint(os.Getenv("FSMCP_REPLAY_SEED"), 10, 64); err == nil {
		seed = v
	}
	c := replay(t, seed, commits)
	t.Logf("seed %d: %d commits: %d applied (%d files created, %d changed, %d deleted; %d hunks; %d directories made, %d removed), "+
		"%d unsupported for a binary file, %d for a mode change, %d empty",
		seed, c.commits, c.applied, c.created, c.changed, c.deleted, c.hunks, c.dirsMade, c.dirsRemoved, c.binary, c.modes, c.empty)
	if commits >= 40 && (c.dirsMade == 0 || c.dirsRemoved == 0 || c.binary == 0 || c.modes == 0) {
		t.Errorf("the history does not cover every case: %+v", c)
	}
}
