package frontend

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
)

// digestOf is the tree_sha256 fs_digest answers for p.
func (h *harness) digestOf(p string) string {
	h.t.Helper()
	r := h.wantOK("fs_digest", map[string]any{"path": p})
	d := r.Str("tree_sha256")
	if len(d) != 64 {
		h.t.Fatalf("fs_digest(%q) = %s", p, r.Text)
	}
	return d
}

// The tree digest is stable, and changes with every property it covers:
// content, mode, name bytes, type, an inside symlink's target, an empty
// directory, a hidden or ignored file; timestamps do not change it.
func TestEditDigestStabilityAndSensitivity(t *testing.T) {
	root := fronttest.EditRoot(t, map[string]string{"t/a.txt": "alpha\n", "t/sub/b.txt": "beta\n", "t/.gitignore": "ignored\n", "t/ignored": "x\n", "t/.hidden": "h\n"})
	if err := os.Symlink("a.txt", filepath.Join(root, "t", "link")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	d0 := s.digestOf("t")
	r := s.wantOK("fs_digest", map[string]any{"path": "t"})
	if r.Str("tree_sha256") != d0 || r.Num("files") != 5 || r.Num("directories") != 2 || r.Str("type") != "directory" ||
		r.Num("bytes") != int64(len("alpha\nbeta\nignored\nx\nh\n")) {
		t.Fatalf("second digest = %s, first %s", r.Text, d0)
	}
	// Timestamps, and a temp file of the worker's, do not count.
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(root, "t", "a.txt"), later, later)
	fronttest.WriteFile(t, filepath.Join(root, "t", fronttest.TempPrefix+"stray"), []byte("tmp"), 0o600)
	if d := s.digestOf("t"); d != d0 {
		t.Fatalf("touch changed the digest")
	}
	os.Remove(filepath.Join(root, "t", fronttest.TempPrefix+"stray"))
	seen := map[string]string{d0: "original"}
	change := func(what string, do, undo func() error) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatal(err)
		}
		d := s.digestOf("t")
		if prev, ok := seen[d]; ok {
			t.Errorf("%s: digest equals that of %s", what, prev)
		}
		seen[d] = what
		if err := undo(); err != nil {
			t.Fatal(err)
		}
		if d := s.digestOf("t"); d != d0 {
			t.Errorf("%s undone: digest did not come back", what)
		}
	}
	a := filepath.Join(root, "t", "a.txt")
	change("content", func() error { return os.WriteFile(a, []byte("alphA\n"), 0o644) }, func() error { return os.WriteFile(a, []byte("alpha\n"), 0o644) })
	change("mode", func() error { return os.Chmod(a, 0o600) }, func() error { return os.Chmod(a, 0o644) })
	change("dir mode", func() error { return os.Chmod(filepath.Join(root, "t", "sub"), 0o700) }, func() error { return os.Chmod(filepath.Join(root, "t", "sub"), 0o755) })
	change("name", func() error { return os.Rename(a, filepath.Join(root, "t", "A.txt")) }, func() error { return os.Rename(filepath.Join(root, "t", "A.txt"), a) })
	change("name bytes", func() error { return os.Rename(a, filepath.Join(root, "t", "a\xff.txt")) }, func() error { return os.Rename(filepath.Join(root, "t", "a\xff.txt"), a) })
	change("moved deeper", func() error { return os.Rename(a, filepath.Join(root, "t", "sub", "a.txt")) }, func() error { return os.Rename(filepath.Join(root, "t", "sub", "a.txt"), a) })
	link := filepath.Join(root, "t", "link")
	change("symlink target", func() error { os.Remove(link); return os.Symlink("sub/b.txt", link) }, func() error { os.Remove(link); return os.Symlink("a.txt", link) })
	change("symlink for file", func() error { os.Remove(link); return os.WriteFile(link, []byte("a.txt"), 0o644) }, func() error { os.Remove(link); return os.Symlink("a.txt", link) })
	change("empty dir", func() error { return os.Mkdir(filepath.Join(root, "t", "e"), 0o755) }, func() error { return os.Remove(filepath.Join(root, "t", "e")) })
	ign := filepath.Join(root, "t", "ignored")
	change("ignored file", func() error { return os.WriteFile(ign, []byte("y\n"), 0o644) }, func() error { return os.WriteFile(ign, []byte("x\n"), 0o644) })

	// An escaping symlink's text is never hashed: two escaping targets
	// digest alike, and the reply names no host path.
	out := filepath.Join(root, "t", "out")
	os.Symlink("../../../etc/passwd", out)
	d1 := s.digestOf("t")
	os.Remove(out)
	os.Symlink("/etc/hostname", out)
	r = s.wantOK("fs_digest", map[string]any{"path": "t"})
	if r.Str("tree_sha256") != d1 {
		t.Errorf("escaping targets digest differently")
	}
	fronttest.NoHostPath(t, r.Text, root)
	os.Remove(out)
	// A file's digest; the root's; a name given as base64.
	if f1, f2 := s.digestOf("t/a.txt"), s.digestOf("t/sub/b.txt"); f1 == f2 {
		t.Errorf("two files digest alike")
	}
	s.digestOf(".")
	os.WriteFile(filepath.Join(root, "t", "n\xff"), []byte("z"), 0o644)
	s.wantOK("fs_digest", map[string]any{"path_base64": base64.StdEncoding.EncodeToString([]byte("t/n\xff"))})
	s.wantErr("fs_digest", map[string]any{"path": "missing"}, "not_found")
	s.wantErr("fs_digest", map[string]any{"path": "../x"}, "outside_root")
	// Left out, path is the root, as "." names it.
	if left, dot := s.wantOK("fs_digest", map[string]any{}).Str("tree_sha256"), s.digestOf("."); left != dot {
		t.Errorf("fs_digest {} = %s, fs_digest . = %s", left, dot)
	}
}
