package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

func envPre(kv ...string) []*fsmcpv1.PatchPrecondition {
	var pre []*fsmcpv1.PatchPrecondition
	for i := 0; i < len(kv); i += 2 {
		c := &fsmcpv1.PatchPrecondition{Path: []byte(kv[i])}
		if kv[i+1] == "" {
			c.MustNotExist = true
		} else {
			c.Sha256 = kv[i+1]
		}
		pre = append(pre, c)
	}
	return pre
}

const appPy = `class App:
    def run(self):
        return 1

    def stop(self):
        return 1

def main():
    App().run()
`

// An envelope as models write it: a new file, an update whose chunks are
// anchored on the enclosing class and method (the changed line occurs
// twice in the file), a move with a change, and a deletion, all in one
// call; the reply says the format.
func TestPatchEnvelopeAsModelsWrite(t *testing.T) {
	s, dir := newWriteService(t)
	wput(t, filepath.Join(dir, "app.py"), appPy)
	wput(t, filepath.Join(dir, "old.txt"), "keep\nx\n")
	wput(t, filepath.Join(dir, "gone.txt"), "bye\n")
	patch := `*** Begin Patch
*** Add File: docs/new.md
+# New
+
*** Update File: app.py
@@ class App:
@@     def stop(self):
-        return 1
+        return 0
@@ def main():
-    App().run()
+    print(App().run())
*** End of File
*** Update File: old.txt
*** Move to: moved/new.txt
@@
 keep
-x
+y
*** Delete File: gone.txt
*** End Patch
`
	pre := envPre("docs/new.md", "", "app.py", wsum([]byte(appPy)), "old.txt", wsum([]byte("keep\nx\n")),
		"moved/new.txt", "", "gone.txt", wsum([]byte("bye\n")))
	resp, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(patch), Preconditions: pre})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetFormat() != "envelope" {
		t.Errorf("format = %q, want envelope", resp.GetFormat())
	}
	want := map[string]string{
		"docs/new.md":   "# New\n\n",
		"app.py":        strings.Replace(strings.Replace(appPy, "        return 1\n\ndef", "        return 0\n\ndef", 1), "    App().run()", "    print(App().run())", 1),
		"moved/new.txt": "keep\ny\n",
	}
	for n, w := range want {
		if got := wcontent(t, filepath.Join(dir, n)); got != w {
			t.Errorf("%s = %q, want %q", n, got, w)
		}
	}
	for _, n := range []string{"old.txt", "gone.txt"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", n, err)
		}
	}
	if got := string(resp.GetFiles()[2].GetMovedTo()); got != "moved/new.txt" {
		t.Errorf("moved_to = %q", got)
	}
}

// The anchor rule: an anchor moves the search start past its first match
// after the previous change; the old lines must then occur once before
// the next change. Without the anchor, the same old line is ambiguous.
func TestPatchEnvelopeAnchors(t *testing.T) {
	for _, tc := range []struct {
		name, patch string
		code        fsmcpv1.ErrorCode
		want        string
	}{
		{"no anchor", "@@\n-        return 1\n+        return 0\n", fsmcpv1.ErrorCode_ERROR_CODE_AMBIGUOUS_MATCH, ""},
		// The old line occurs after the anchor twice, under run and stop.
		{"anchor, old twice after it", "@@ def run(self):\n-        return 1\n+        return 0\n", fsmcpv1.ErrorCode_ERROR_CODE_AMBIGUOUS_MATCH, ""},
		{"anchor and context", "@@ def run(self):\n-        return 1\n+        return 0\n \n     def stop(self):\n", 0,
			strings.Replace(appPy, "return 1", "return 0", 1)},
		{"second anchor", "@@ def stop(self):\n-        return 1\n+        return 0\n", 0,
			strings.Replace(appPy, "        return 1\n\ndef", "        return 0\n\ndef", 1)},
		{"anchor missing", "@@ def nope():\n-        return 1\n+        return 0\n", fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, ""},
		{"lines only before anchor", "@@ def main():\n-        return 1\n+        return 0\n", fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, ""},
		{"insert after anchor", "@@ def main():\n+    setup()\n", 0,
			strings.Replace(appPy, "def main():\n", "def main():\n    setup()\n", 1)},
		{"context not exact", "@@\n-  return 1\n+  return 0\n", fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newWriteService(t)
			p := filepath.Join(dir, "app.py")
			wput(t, p, appPy)
			patch := "*** Begin Patch\n*** Update File: app.py\n" + tc.patch + "*** End Patch\n"
			_, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(patch), Preconditions: envPre("app.py", wsum([]byte(appPy)))})
			if tc.code != 0 {
				wantWriteCode(t, "Patch", err, tc.code)
				tc.want = appPy
			} else if err != nil {
				t.Fatal(err)
			}
			if got := wcontent(t, p); got != tc.want {
				t.Errorf("app.py = %q, want %q", got, tc.want)
			}
		})
	}
}

// An envelope's lines take the file's line endings: on a CRLF file, its
// "\n" lines match and are written as "\r\n"; at *** End of File, a last
// line without a newline stays without one.
func TestPatchEnvelopeLineEndings(t *testing.T) {
	for _, tc := range []struct{ name, old, patch, want string }{
		{"crlf", "a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n", "a\r\nB\r\nc\r\n"},
		{"lf", "a\nb\nc\n", "@@\n a\n-b\n+B\n", "a\nB\nc\n"},
		{"no final newline", "a\nb", "@@\n a\n-b\n+B\n*** End of File\n", "a\nB"},
		{"append after last line", "a\nb", "@@\n+c\n", "a\nb\nc\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newWriteService(t)
			p := filepath.Join(dir, "f")
			wput(t, p, tc.old)
			patch := "*** Begin Patch\n*** Update File: f\n" + tc.patch + "*** End Patch"
			if _, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(patch), Preconditions: envPre("f", wsum([]byte(tc.old)))}); err != nil {
				t.Fatal(err)
			}
			if got := wcontent(t, p); got != tc.want {
				t.Errorf("f = %q, want %q", got, tc.want)
			}
		})
	}
}

// Refusals change nothing: a malformed envelope, a missing precondition
// (for the moved-to path too), a move onto an existing file, an add of an
// existing file, a delete of a missing one, and a patch naming one file
// twice.
func TestPatchEnvelopeRefusals(t *testing.T) {
	x := wsum([]byte("x\n"))
	for _, tc := range []struct {
		name, patch string
		pre         []*fsmcpv1.PatchPrecondition
		code        fsmcpv1.ErrorCode
		msg         string
	}{
		{"malformed", "*** Begin Patch\n*** Update File: a\n?x\n*** End Patch", envPre("a", x), fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "line 3"},
		{"no end", "*** Begin Patch\n*** Delete File: a\n", envPre("a", x), fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "*** End Patch"},
		{"move without precondition", "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch", envPre("a", x), fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "if_sha256 has no entry"},
		{"move onto existing", "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch", envPre("a", x, "b", ""), fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, "exists"},
		{"add existing", "*** Begin Patch\n*** Add File: a\n+y\n*** End Patch", envPre("a", ""), fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, "exists"},
		{"delete missing", "*** Begin Patch\n*** Delete File: nope\n*** End Patch", envPre("nope", x), fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, ""},
		{"same file twice", "*** Begin Patch\n*** Update File: a\n-x\n+y\n*** Update File: ./a\n-x\n+z\n*** End Patch", envPre("a", x, "./a", x), fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "same file"},
		{"stale precondition", "*** Begin Patch\n*** Update File: a\n-x\n+y\n*** End Patch", envPre("a", wsum([]byte("other"))), fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newWriteService(t)
			wput(t, filepath.Join(dir, "a"), "x\n")
			wput(t, filepath.Join(dir, "b"), "b\n")
			_, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(tc.patch), Preconditions: tc.pre})
			e := wantWriteCode(t, "Patch", err, tc.code)
			if e != nil && !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q does not say %q", e.Message, tc.msg)
			}
			if wcontent(t, filepath.Join(dir, "a")) != "x\n" || wcontent(t, filepath.Join(dir, "b")) != "b\n" {
				t.Error("a refused patch changed a file")
			}
		})
	}
}

// A dry run answers the preconditions the real call needs, for both ends
// of a move, and a moved file's diff against the file it was.
func TestPatchEnvelopeDryRun(t *testing.T) {
	s, dir := newWriteService(t)
	wput(t, filepath.Join(dir, "a"), "x\n")
	patch := "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n-x\n+y\n*** End Patch"
	resp, err := s.Patch(context.Background(), &fsmcpv1.PatchRequest{Patch: []byte(patch), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	fs := resp.GetFiles()
	if len(fs) != 2 || fs[0].GetCurrentSha256() != wsum([]byte("x\n")) || fs[1].GetCurrentSha256() != "" || !fs[1].GetCreated() {
		t.Fatalf("files = %v", fs)
	}
	if d := string(fs[1].GetDiff()); !strings.Contains(d, "-x\n+y\n") {
		t.Errorf("diff = %q", d)
	}
	if wcontent(t, filepath.Join(dir, "a")) != "x\n" {
		t.Error("the dry run changed a")
	}
}
