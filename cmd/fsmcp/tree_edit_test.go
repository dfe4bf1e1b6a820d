package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func digestOf(s *server, p string) string {
	s.t.Helper()
	r := s.wantOK("fs_digest", map[string]any{"path": p})
	d := r.str("tree_sha256")
	if len(d) != 64 {
		s.t.Fatalf("fs_digest(%q) = %s", p, r.text)
	}
	return d
}

func TestEditGuardedDeleteAndMove(t *testing.T) {
	root := editRoot(t, map[string]string{"f": "content\n", "d/x": "x\n", "d/sub/y": "y\n", "g": "gee\n", "e/z": "z\n"})
	s := start(t, root)
	fsum := sha([]byte("content\n"))
	dsum := digestOf(s, "d")
	wrong := sha([]byte("wrong"))
	// Wrong hashes, wrong kinds, bad arguments: refused, nothing changes.
	before := snapshot(t, root)
	r := s.wantErr("fs_delete", map[string]any{"path": "f", "if_sha256": wrong}, "precondition_failed")
	if r.doc["error"].(map[string]any)["current_sha256"] != fsum {
		t.Errorf("delete precondition_failed = %s", r.text)
	}
	r = s.wantErr("fs_delete", map[string]any{"path": "d", "recursive": true, "if_tree_sha256": wrong}, "precondition_failed")
	if r.doc["error"].(map[string]any)["current_sha256"] != dsum {
		t.Errorf("tree precondition_failed = %s", r.text)
	}
	s.wantErr("fs_delete", map[string]any{"path": "d", "recursive": true, "if_sha256": dsum}, "precondition_failed")
	s.wantErr("fs_delete", map[string]any{"path": "f", "if_tree_sha256": fsum}, "precondition_failed")
	s.wantErr("fs_delete", map[string]any{"path": "f", "if_sha256": fsum, "if_tree_sha256": dsum}, "invalid_argument")
	s.wantErr("fs_delete", map[string]any{"path": "f", "if_sha256": "ABC"}, "invalid_argument")
	s.wantErr("fs_delete", map[string]any{"path": "d", "if_tree_sha256": dsum}, "not_empty")
	s.wantErr("fs_move", map[string]any{"from": "f", "to": "f2", "if_sha256": wrong}, "precondition_failed")
	s.wantErr("fs_move", map[string]any{"from": "d", "to": "d2", "if_tree_sha256": wrong}, "precondition_failed")
	s.wantErr("fs_move", map[string]any{"from": "d", "to": "d2", "if_sha256": dsum}, "precondition_failed")
	s.wantErr("fs_move", map[string]any{"from": "f", "to": "g", "if_sha256": fsum}, "already_exists")
	sameSnapshot(t, "refused guarded calls", before, snapshot(t, root))
	noTempFiles(t, root)

	// A change after the digest is seen.
	os.WriteFile(filepath.Join(root, "d", "sub", "y"), []byte("Y\n"), 0o644)
	s.wantErr("fs_delete", map[string]any{"path": "d", "recursive": true, "if_tree_sha256": dsum}, "precondition_failed")
	os.WriteFile(filepath.Join(root, "d", "sub", "y"), []byte("y\n"), 0o644)

	// The right hashes act.
	s.wantOK("fs_move", map[string]any{"from": "f", "to": "f2", "if_sha256": fsum})
	s.wantOK("fs_move", map[string]any{"from": "d", "to": "d2", "if_tree_sha256": dsum})
	if digestOf(s, "d2") != dsum {
		t.Errorf("a moved tree digests differently")
	}
	s.wantOK("fs_delete", map[string]any{"path": "f2", "if_sha256": fsum})
	r = s.wantOK("fs_delete", map[string]any{"path": "d2", "recursive": true, "if_tree_sha256": dsum})
	if r.num("removed") != 4 {
		t.Errorf("guarded recursive delete = %s", r.text)
	}
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	s.wantOK("fs_delete", map[string]any{"path": "empty", "if_tree_sha256": digestOf(s, "empty")})
	for _, gone := range []string{"f", "f2", "d", "d2", "empty"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still exists: %v", gone, err)
		}
	}
	noTempFiles(t, root)
}

func TestEditCopy(t *testing.T) {
	root := editRoot(t, map[string]string{"f": "file\n", "taken": "keep\n", "t/a": "a\n", "t/s/b": "b\n"})
	if err := os.Mkdir(filepath.Join(root, "t", "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "f")
	os.Chmod(f, 0o4751)
	os.Chmod(filepath.Join(root, "t", "s"), 0o711)
	if err := unix.Setxattr(f, "user.origin", []byte("copy-test"), 0); err != nil {
		t.Fatalf("setxattr: %v", err)
	}
	haveACL := exec.Command("setfacl", "-m", "u:4321:rw-", f).Run() == nil
	s := start(t, root)

	r := s.wantOK("fs_copy", map[string]any{"from": "f", "to": "f2"})
	if r.num("files") != 1 || r.num("bytes") != 5 {
		t.Errorf("copy = %s", r.text)
	}
	f2 := filepath.Join(root, "f2")
	var st1, st2 syscall.Stat_t
	syscall.Stat(f, &st1)
	syscall.Stat(f2, &st2)
	if string(readFile(t, f2)) != "file\n" || st2.Mode != st1.Mode || st2.Uid != st1.Uid || st2.Ino == st1.Ino {
		t.Errorf("copied file: mode %o (want %o), uid %d", st2.Mode, st1.Mode, st2.Uid)
	}
	if x := xattrList(t, f2); x["user.origin"] != "copy-test" {
		t.Errorf("xattrs of the copy: %q", x)
	}
	if haveACL && getfacl(t, f2) != getfacl(t, f) {
		t.Errorf("ACL of the copy:\n%s\nwant\n%s", getfacl(t, f2), getfacl(t, f))
	}
	// Never over an existing to, of any kind.
	before := snapshot(t, root)
	s.wantErr("fs_copy", map[string]any{"from": "f", "to": "taken"}, "already_exists")
	s.wantErr("fs_copy", map[string]any{"from": "t", "to": "taken", "recursive": true}, "already_exists")
	s.wantErr("fs_copy", map[string]any{"from": "f", "to": "t"}, "already_exists")
	s.wantErr("fs_copy", map[string]any{"from": "t", "to": "t2"}, "is_a_directory")
	s.wantErr("fs_copy", map[string]any{"from": "t", "to": "t/s/inside", "recursive": true}, "invalid_argument")
	s.wantErr("fs_copy", map[string]any{"from": "missing", "to": "x"}, "not_found")
	s.wantErr("fs_copy", map[string]any{"from": "f", "to": "../x"}, "outside_root")
	s.wantErr("fs_copy", map[string]any{"from": ".", "to": "x", "recursive": true}, "invalid_argument")
	s.wantErr("fs_copy", map[string]any{"from": "f"}, "invalid_argument")
	sameSnapshot(t, "refused copies", before, snapshot(t, root))

	// A tree: everything, with its modes, and the same digest.
	r = s.wantOK("fs_copy", map[string]any{"from": "t", "to": "t2", "recursive": true})
	if r.num("files") != 2 || r.num("directories") != 3 {
		t.Errorf("tree copy = %s", r.text)
	}
	if digestOf(s, "t2") != digestOf(s, "t") {
		t.Errorf("the copied tree digests differently")
	}
	// A tree holding a symlink is refused whole: nothing at to, no temp.
	if err := os.Symlink("a", filepath.Join(root, "t", "s", "link")); err != nil {
		t.Fatal(err)
	}
	s.wantErr("fs_copy", map[string]any{"from": "t", "to": "t3", "recursive": true}, "unsupported")
	s.wantErr("fs_copy", map[string]any{"from": "t/s/link", "to": "l2"}, "unsupported")
	for _, p := range []string{"t3", "l2"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("a refused copy left %s: %v", p, err)
		}
	}
	noTempFiles(t, root)
	if names := listNames(s.wantOK("fs_list", map[string]any{"path": ""})); strings.Join(names, " ") != "f f2 t t2 taken" {
		t.Errorf("fs_list after copies = %v", names)
	}
}
