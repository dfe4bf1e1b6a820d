package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// patchFixture is a tree before and after an edit of every kind a patch
// carries: LF, CRLF, no final newline, bytes that are not UTF-8, a new
// file, a deleted file.
var patchBefore = map[string]string{
	"m.txt":      "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\niota\nkappa\n",
	"crlf.txt":   "one\r\ntwo\r\nthree\r\nfour\r\n",
	"nonl.txt":   "first\nlast",
	"bin.dat":    "\xff\xfe\x00head\n\x80\x81 middle\n\xfe tail\n",
	"sub/del.md": "gone\nsoon\n",
}

var patchAfter = map[string]string{
	"m.txt":      "alpha\nBETA\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\nIOTA\nkappa\nlambda\n",
	"crlf.txt":   "one\r\nTWO\r\nthree\r\nfour\r\n",
	"nonl.txt":   "first\nLAST",
	"bin.dat":    "\xff\xfe\x00head\n\x80\x82 middle\n\xfe tail\n",
	"sub/new.go": "package sub\n",
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, []byte(content), 0o644)
	}
}

func run(t *testing.T, dir string, okExit []int, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		good := false
		for _, c := range okExit {
			good = good || (ok && ee.ExitCode() == c)
		}
		if !good {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	return out
}

// gitPatch is what git diff writes for the fixture: a repository holding
// the old tree, changed into the new one.
func gitPatch(t *testing.T) []byte {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	writeTree(t, dir, patchBefore)
	run(t, dir, nil, "git", "init", "-q")
	run(t, dir, nil, "git", "-c", "core.autocrlf=false", "add", "-A")
	run(t, dir, nil, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "old")
	os.Remove(filepath.Join(dir, "sub", "del.md"))
	writeTree(t, dir, patchAfter)
	run(t, dir, nil, "git", "add", "-A")
	return run(t, dir, nil, "git", "-c", "core.autocrlf=false", "diff", "--cached", "--text")
}

// diffPatch is what diff -u writes for the fixture, file by file as a/X
// and b/X, with /dev/null for the created and the deleted file.
func diffPatch(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, filepath.Join(dir, "a"), patchBefore)
	writeTree(t, filepath.Join(dir, "b"), patchAfter)
	var out []byte
	for _, n := range []string{"bin.dat", "crlf.txt", "m.txt", "nonl.txt"} {
		out = append(out, run(t, dir, []int{1}, "diff", "-u", "--text", "a/"+n, "b/"+n)...)
	}
	out = append(out, run(t, dir, []int{1}, "diff", "-u", "/dev/null", "b/sub/new.go")...)
	out = append(out, run(t, dir, []int{1}, "diff", "-u", "a/sub/del.md", "/dev/null")...)
	return out
}

func patchPre() map[string]any {
	pre := map[string]any{"sub/new.go": nil}
	for n, c := range patchBefore {
		pre[n] = sha([]byte(c))
	}
	return pre
}

func checkTree(t *testing.T, root string, want map[string]string, gone ...string) {
	t.Helper()
	for n, c := range want {
		got, err := os.ReadFile(filepath.Join(root, n))
		if err != nil || !bytes.Equal(got, []byte(c)) {
			t.Errorf("%s = %q (%v), want %q", n, got, err, c)
		}
	}
	for _, n := range gone {
		if _, err := os.Lstat(filepath.Join(root, n)); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", n, err)
		}
	}
}

func TestEditPatchGitAndDiff(t *testing.T) {
	for _, c := range []struct {
		name  string
		patch func(*testing.T) []byte
	}{{"git diff", gitPatch}, {"diff -u", diffPatch}} {
		t.Run(c.name, func(t *testing.T) {
			patch := c.patch(t)
			root := editRoot(t, patchBefore)
			s := start(t, root)
			b64 := base64.StdEncoding.EncodeToString(patch)
			// A dry run answers every file and changes nothing.
			stamps := map[string]untouched{}
			for n := range patchBefore {
				stamps[n] = stamp(t, filepath.Join(root, n))
			}
			r := s.wantOK("fs_patch", map[string]any{"patch": b64, "encoding": "base64", "if_sha256": patchPre(), "dry_run": true})
			files, _ := r.doc["files"].([]any)
			if len(files) != 6 || r.doc["dry_run"] != true || r.doc["diff_truncated"] != false {
				t.Fatalf("dry run = %s", r.text)
			}
			for _, f := range files {
				m := f.(map[string]any)
				name, _ := m["path"].(string)
				if m["deleted"] == true {
					continue
				}
				if m["sha256"] != sha([]byte(patchAfter[name])) {
					t.Errorf("dry run: %s sha256 %v, want that of the new content", name, m["sha256"])
				}
				if d, ok := m["diff"].(string); ok {
					if name != "sub/new.go" {
						patchApplies(t, d, []byte(patchBefore[name]), []byte(patchAfter[name]))
					}
				} else if _, ok := m["diff_base64"].(string); !ok {
					t.Errorf("dry run: %s has no diff: %v", name, m)
				}
			}
			for n, u := range stamps {
				u.check(t, "dry-run patch", filepath.Join(root, n))
			}
			if _, err := os.Lstat(filepath.Join(root, "sub", "new.go")); !os.IsNotExist(err) {
				t.Fatal("a dry run created a file")
			}
			// The real thing.
			r = s.wantOK("fs_patch", map[string]any{"patch": b64, "encoding": "base64", "if_sha256": patchPre()})
			checkTree(t, root, patchAfter, "sub/del.md")
			if fi, err := os.Stat(filepath.Join(root, "sub", "new.go")); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("created file: %v %v", fi, err)
			}
			noTempFiles(t, root)
			// Applied twice: the preconditions no longer hold.
			s.wantErr("fs_patch", map[string]any{"patch": b64, "encoding": "base64", "if_sha256": patchPre()}, "precondition_failed")
			checkTree(t, root, patchAfter, "sub/del.md")
		})
	}
}

func TestEditPatchRefusals(t *testing.T) {
	patch := string(diffPatch(t))
	root := editRoot(t, patchBefore)
	writeFile(t, filepath.Join(root, "dup.txt"), []byte("x\nsame\ny\nx\nsame\ny\n"), 0o644)
	s := start(t, root)
	before := snapshot(t, root)
	b64 := base64.StdEncoding.EncodeToString([]byte(patch))
	call := func(p string, pre map[string]any, code string) reply {
		t.Helper()
		return s.wantErr("fs_patch", map[string]any{"patch": base64.StdEncoding.EncodeToString([]byte(p)), "encoding": "base64", "if_sha256": pre}, code)
	}
	pre := patchPre()
	// Preconditions: missing, extra, of the wrong kind, stale.
	missing := patchPre()
	delete(missing, "m.txt")
	call(patch, missing, "invalid_argument")
	extra := patchPre()
	extra["other.txt"] = nil
	call(patch, extra, "invalid_argument")
	wrongKind := patchPre()
	wrongKind["m.txt"] = nil
	call(patch, wrongKind, "invalid_argument")
	wrongKind = patchPre()
	wrongKind["sub/new.go"] = sha([]byte("x"))
	call(patch, wrongKind, "invalid_argument")
	stale := patchPre()
	stale["nonl.txt"] = sha([]byte("stale"))
	r := call(patch, stale, "precondition_failed")
	if r.doc["error"].(map[string]any)["current_sha256"] != sha([]byte(patchBefore["nonl.txt"])) {
		t.Errorf("stale precondition = %s", r.text)
	}
	s.wantErr("fs_patch", map[string]any{"patch": b64, "encoding": "base64"}, "invalid_argument")
	// A hunk of the last file that does not match: nothing changes, and
	// the nearest candidate is named.
	bad := strings.Replace(patch, "-soon\n", "-soon  \n", 1)
	r = call(bad, pre, "no_match")
	if n := nearestOf(t, r); n["differs"] != "whitespace" || n["line_number"] != float64(1) {
		t.Errorf("nearest = %v", n)
	}
	// CRLF read as LF does not match either.
	lf := strings.Replace(patch, "-two\r\n", "-two\n", 1)
	r = call(lf, pre, "no_match")
	if n := nearestOf(t, r); n["differs"] != "line_endings" {
		t.Errorf("nearest = %v", n)
	}
	// Context that occurs twice.
	amb := "--- a/dup.txt\n+++ b/dup.txt\n@@ -2 +2 @@\n-same\n+SAME\n"
	r = call(amb, map[string]any{"dup.txt": sha([]byte("x\nsame\ny\nx\nsame\ny\n"))}, "ambiguous_match")
	if r.doc["error"].(map[string]any)["count"] != float64(2) {
		t.Errorf("ambiguous = %s", r.text)
	}
	// Creating a file that exists; not a diff; a binary patch. (The
	// policy's refusals are worker/TestEditRPCsFollowThePolicy's.)
	call("--- /dev/null\n+++ b/m.txt\n@@ -0,0 +1 @@\n+x\n", map[string]any{"m.txt": nil}, "precondition_failed")
	call("hello\n", map[string]any{}, "invalid_argument")
	call("diff --git a/bin.dat b/bin.dat\nindex 1..2 100644\nBinary files a/bin.dat and b/bin.dat differ\n", map[string]any{"bin.dat": sha([]byte(patchBefore["bin.dat"]))}, "unsupported")
	// The same file twice, under two spellings.
	twice := "--- a/m.txt\n+++ b/m.txt\n@@ -1 +1 @@\n-alpha\n+ALPHA\n--- a/sub/../m.txt\n+++ b/sub/../m.txt\n@@ -3 +3 @@\n-gamma\n+GAMMA\n"
	call(twice, map[string]any{"m.txt": sha([]byte(patchBefore["m.txt"])), "sub/../m.txt": sha([]byte(patchBefore["m.txt"]))}, "invalid_argument")
	sameSnapshot(t, "refused patches", before, snapshot(t, root))
	noTempFiles(t, root)
}

// A patch touching a file whose name is not UTF-8 (as git diff writes it,
// quoted with octal escapes) carries that file's precondition in
// if_sha256_base64, keyed by the name as base64, beside if_sha256 for the
// others. Each way of getting that wrong is refused with nothing changed.
func TestEditPatchNonUTF8Preconditions(t *testing.T) {
	const odd = "caf\xe9.txt"
	before := map[string]string{odd: "one\ntwo\nthree\n", "plain.txt": "a\nb\n"}
	after := map[string]string{odd: "one\nTWO\nthree\n", "plain.txt": "a\nB\n"}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	writeTree(t, dir, before)
	run(t, dir, nil, "git", "init", "-q")
	run(t, dir, nil, "git", "add", "-A")
	run(t, dir, nil, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "old")
	writeTree(t, dir, after)
	patch := run(t, dir, nil, "git", "diff", "--text")
	if !bytes.Contains(patch, []byte(`"a/caf\351.txt"`)) {
		t.Fatalf("git did not quote the name as expected:\n%s", patch)
	}
	root := editRoot(t, before)
	s := start(t, root)
	b64 := base64.StdEncoding.EncodeToString(patch)
	oddKey := base64.StdEncoding.EncodeToString([]byte(odd))
	call := func(text, twin map[string]any, code string) reply {
		t.Helper()
		args := map[string]any{"patch": b64, "encoding": "base64"}
		if text != nil {
			args["if_sha256"] = text
		}
		if twin != nil {
			args["if_sha256_base64"] = twin
		}
		if code == "" {
			return s.wantOK("fs_patch", args)
		}
		return s.wantErr("fs_patch", args, code)
	}
	plain := map[string]any{"plain.txt": sha([]byte(before["plain.txt"]))}
	snap := snapshot(t, root)
	// The name missing: if_sha256 alone cannot carry it.
	r := call(plain, nil, "invalid_argument")
	if !strings.Contains(r.text, "if_sha256_base64") {
		t.Errorf("missing non-UTF-8 precondition: %s does not point to if_sha256_base64", r.text)
	}
	// A key that is not base64; a value that is not a sha256.
	call(plain, map[string]any{"caf\u00e9.txt": sha([]byte(before[odd]))}, "invalid_argument")
	call(plain, map[string]any{oddKey: "not-a-sha"}, "invalid_argument")
	// The wrong kind: null for a file the patch changes.
	call(plain, map[string]any{oddKey: nil}, "invalid_argument")
	// A path named in both objects.
	both := map[string]any{oddKey: sha([]byte(before[odd])), base64.StdEncoding.EncodeToString([]byte("plain.txt")): sha([]byte(before["plain.txt"]))}
	call(plain, both, "invalid_argument")
	// A path the patch does not touch.
	call(plain, map[string]any{oddKey: sha([]byte(before[odd])), base64.StdEncoding.EncodeToString([]byte("other\xff")): nil}, "invalid_argument")
	// Stale: precondition_failed with the current hash.
	r = call(plain, map[string]any{oddKey: sha([]byte("stale"))}, "precondition_failed")
	if r.doc["error"].(map[string]any)["current_sha256"] != sha([]byte(before[odd])) {
		t.Errorf("stale twin precondition = %s", r.text)
	}
	sameSnapshot(t, "refused patches", snap, snapshot(t, root))

	// Right: both files change, and the reply names the odd one as base64.
	r = call(plain, map[string]any{oddKey: sha([]byte(before[odd]))}, "")
	checkTree(t, root, after)
	var named bool
	for _, f := range r.doc["files"].([]any) {
		m := f.(map[string]any)
		if m["path_base64"] == oddKey {
			named = m["sha256"] == sha([]byte(after[odd]))
		}
	}
	if !named {
		t.Errorf("the reply does not name %q as path_base64 with its new sha256: %s", odd, r.text)
	}
	// The twin alone, for a patch that touches only the odd name.
	one := "--- \"a/caf\\351.txt\"\n+++ \"b/caf\\351.txt\"\n@@ -3 +3 @@\n-three\n+THREE\n"
	s.wantOK("fs_patch", map[string]any{"patch": one, "if_sha256_base64": map[string]any{oddKey: sha([]byte(after[odd]))}})
	checkTree(t, root, map[string]string{odd: "one\nTWO\nTHREE\n"})
	noTempFiles(t, root)
}

// A dry run needs no if_sha256: it answers the if_sha256 (and, for a name
// that is not UTF-8, if_sha256_base64) the real call needs, each touched
// file's sha256 now or null for a created one, and passing them to the
// real call applies the patch. The real call still refuses to go without
// them; a dry run checks the preconditions it is given, and a file it
// would create must not exist.
func TestEditPatchDryRunHashes(t *testing.T) {
	const odd = "caf\xe9.txt"
	before := map[string]string{odd: "x\n"}
	for n, c := range patchBefore {
		before[n] = c
	}
	patch := append(diffPatch(t), "--- a/"+odd+"\n+++ b/"+odd+"\n@@ -1 +1 @@\n-x\n+y\n"...)
	b64 := base64.StdEncoding.EncodeToString(patch)
	root := editRoot(t, before)
	s := start(t, root)
	snap := snapshot(t, root)
	r := s.wantOK("fs_patch", map[string]any{"patch": b64, "encoding": "base64", "dry_run": true})
	sameSnapshot(t, "a dry run", snap, snapshot(t, root))
	text, _ := r.doc["if_sha256"].(map[string]any)
	if fmt.Sprint(text) != fmt.Sprint(patchPre()) {
		t.Errorf("if_sha256 = %v, want %v", text, patchPre())
	}
	oddKey := base64.StdEncoding.EncodeToString([]byte(odd))
	b64Pre, _ := r.doc["if_sha256_base64"].(map[string]any)
	if len(b64Pre) != 1 || b64Pre[oddKey] != sha([]byte("x\n")) {
		t.Errorf("if_sha256_base64 = %v", b64Pre)
	}
	real := map[string]any{"patch": b64, "encoding": "base64"}
	s.wantErr("fs_patch", real, "invalid_argument")
	short := map[string]any{}
	for k, v := range text {
		short[k] = v
	}
	delete(short, "m.txt")
	s.wantErr("fs_patch", map[string]any{"patch": b64, "encoding": "base64", "if_sha256": short, "if_sha256_base64": b64Pre}, "invalid_argument")
	// Given ones are checked by a dry run.
	s.wantErr("fs_patch", map[string]any{"patch": b64, "encoding": "base64", "dry_run": true, "if_sha256": map[string]any{"m.txt": sha([]byte("stale"))}}, "precondition_failed")
	sameSnapshot(t, "refused calls", snap, snapshot(t, root))
	real["if_sha256"], real["if_sha256_base64"] = text, b64Pre
	s.wantOK("fs_patch", real)
	checkTree(t, root, patchAfter, "sub/del.md")
	if got := string(readFile(t, filepath.Join(root, odd))); got != "y\n" {
		t.Errorf("%q = %q", odd, got)
	}
	// Creating a file that exists, in a dry run without a precondition.
	s.wantErr("fs_patch", map[string]any{"patch": "--- /dev/null\n+++ b/m.txt\n@@ -0,0 +1 @@\n+x\n", "dry_run": true}, "precondition_failed")
}
