package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// The umask never eats bits: a new file is 0644, a new directory 0755, and
// an existing file keeps every mode bit but those a content change drops,
// as the kernel's write path does: setuid, and setgid when the file is
// group-executable.
func TestWriteModes(t *testing.T) {
	root, _ := tree(t)
	old := syscall.Umask(0o077)
	s := start(t, root)
	syscall.Umask(old)

	s.wantOK("fs_write", map[string]any{"path": "fresh", "content": "x", "if_sha256": nil})
	if fi, err := os.Stat(filepath.Join(root, "fresh")); err != nil || fi.Mode() != 0o644 {
		t.Errorf("new file mode = %v, %v; want 0644 despite umask 077", fi.Mode(), err)
	}
	s.wantOK("fs_mkdir", map[string]any{"path": "made/deeper"})
	for _, d := range []string{"made", "made/deeper"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("new directory %s: %v, %v; want 0755 despite umask 077", d, fi.Mode(), err)
		}
	}
	for _, mode := range []uint32{0o666, 0o600, 0o2755, 0o2745, 0o4755, 0o1644, 0o7777, 0o000} {
		want := mode &^ syscall.S_ISUID
		if mode&0o010 != 0 {
			want &^= syscall.S_ISGID
		}
		name := fmt.Sprintf("m%04o", mode)
		p := filepath.Join(root, name)
		writeFile(t, p, []byte("old"), 0)
		if err := syscall.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		s.wantOK("fs_write", map[string]any{"path": name, "content": "new", "if_sha256": sha([]byte("old"))})
		s.wantOK("fs_replace", map[string]any{"path": name, "if_sha256": sha([]byte("new")),
			"edits": []any{map[string]any{"old": "ne", "new": "NE"}}})
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != want || string(readFile(t, p)) != "NEw" {
			t.Errorf("%s: mode %04o content %q after write, want mode %04o", name, st.Mode&0o7777, readFile(t, p), want)
		}
	}
}

func xattrList(t *testing.T, p string) map[string]string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" {
			continue
		}
		v := make([]byte, 64<<10)
		vn, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Fatal(err)
		}
		m[name] = string(v[:vn])
	}
	return m
}

func getfacl(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("getfacl", "-cp", p).CombinedOutput()
	if err != nil {
		t.Fatalf("getfacl: %v\n%s", err, out)
	}
	return string(out)
}

// lsattr returns chattr's letters for p.
func lsattr(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("lsattr", "-d", p).CombinedOutput()
	if err != nil {
		t.Fatalf("lsattr: %v\n%s", err, out)
	}
	flags, _, _ := strings.Cut(string(out), " ")
	return flags
}

// Owner, group, user.*, trusted.* and security.* attributes, a POSIX ACL
// and inode flags survive fs_write and fs_replace exactly (the tests run as
// root).
func TestWritePreservesMetadata(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to set trusted.* and security.* attributes and foreign owners")
	}
	for _, tool := range []string{"setfacl", "getfacl", "chattr", "lsattr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install Debian's acl and e2fsprogs packages", tool)
		}
	}
	root, _ := tree(t)
	p := filepath.Join(root, "meta.txt")
	writeFile(t, p, []byte("alpha\n"), 0o640)
	if err := os.Chown(p, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"user.origin": "test", "trusted.fsmcp": "\x00\x01bin", "security.fsmcptest": "label"} {
		if err := unix.Setxattr(p, name, []byte(v), 0); err != nil {
			t.Fatalf("setxattr %s: %v", name, err)
		}
	}
	if out, err := exec.Command("setfacl", "-m", "u:4321:rw-,g:8765:r--", p).CombinedOutput(); err != nil {
		t.Fatalf("setfacl: %v\n%s", err, out)
	}
	if err := syscall.Chmod(p, 0o2660); err != nil { // setgid, and the ACL mask follows the group bits
		t.Fatal(err)
	}
	// A default ACL on the directory must not leak into the replaced file.
	if out, err := exec.Command("setfacl", "-d", "-m", "u:999:rwx", root).CombinedOutput(); err != nil {
		t.Fatalf("setfacl -d: %v\n%s", err, out)
	}
	// Inode flags: no-dump and no-atime (chattr +dA).
	if out, err := exec.Command("chattr", "+dA", p).CombinedOutput(); err != nil {
		t.Fatalf("chattr: %v\n%s", err, out)
	}
	wantFlags := lsattr(t, p)
	wantX := xattrList(t, p)
	wantACL := getfacl(t, p)
	var want syscall.Stat_t
	syscall.Stat(p, &want)
	if !strings.Contains(wantACL, "user:4321:rw-") || wantX["system.posix_acl_access"] == "" {
		t.Fatalf("test setup: ACL not set: %s %q", wantACL, wantX)
	}
	s := start(t, root)
	// Hold the old inode open, so its number cannot be reused.
	held, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r := s.wantOK("fs_write", map[string]any{"path": "meta.txt", "content": "beta\n", "if_sha256": sha([]byte("alpha\n"))})
	check := func(op string) {
		t.Helper()
		var got syscall.Stat_t
		syscall.Stat(p, &got)
		if got.Mode != want.Mode || got.Uid != want.Uid || got.Gid != want.Gid {
			t.Errorf("%s: mode %o uid %d gid %d, want %o %d %d", op, got.Mode, got.Uid, got.Gid, want.Mode, want.Uid, want.Gid)
		}
		if got.Ino == want.Ino {
			t.Errorf("%s: the file was written in place, not replaced", op)
		}
		want.Ino = got.Ino
		if gotX := xattrList(t, p); fmt.Sprint(gotX) != fmt.Sprint(wantX) {
			t.Errorf("%s: xattrs %q, want %q", op, gotX, wantX)
		}
		if got := getfacl(t, p); got != wantACL {
			t.Errorf("%s: ACL\n%s\nwant\n%s", op, got, wantACL)
		}
		if got := lsattr(t, p); got != wantFlags {
			t.Errorf("%s: inode flags %s, want %s", op, got, wantFlags)
		}
	}
	check("fs_write")
	s.wantOK("fs_replace", map[string]any{"path": "meta.txt", "if_sha256": r.str("sha256"),
		"edits": []any{map[string]any{"old": "beta", "new": "gamma"}}})
	check("fs_replace")
	if got := readFile(t, p); string(got) != "gamma\n" {
		t.Errorf("content %q", got)
	}
	// A new file in the directory gets the inherited default ACL, and
	// mode 0644 as documented.
	s.wantOK("fs_write", map[string]any{"path": "inherit.txt", "content": "x", "if_sha256": nil})
	if acl := getfacl(t, filepath.Join(root, "inherit.txt")); !strings.Contains(acl, "user:999:rwx") {
		t.Errorf("new file did not inherit the default ACL:\n%s", acl)
	}
	noTempFiles(t, root)
}

// Replacing a file with several links breaks the link, and the reply says
// so; the other name keeps the old content.
func TestWriteBreaksHardLink(t *testing.T) {
	root, _ := tree(t)
	if err := os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "new\n", "if_sha256": sha([]byte("hello\n"))})
	if r.doc["broke_hard_link"] != true {
		t.Errorf("fs_write over a linked file = %s, want broke_hard_link", r.text)
	}
	if got := readFile(t, filepath.Join(root, "sub", "a-link")); string(got) != "hello\n" {
		t.Errorf("the other link = %q, want the old content", got)
	}
	r = s.wantOK("fs_write", map[string]any{"path": "a.txt", "content": "newer\n", "if_sha256": sha([]byte("new\n"))})
	if r.doc["broke_hard_link"] != false {
		t.Errorf("fs_write over a single-link file = %s", r.text)
	}
}

// Of many concurrent writes with the same if_sha256, exactly one wins.
func TestWriteConcurrentSamePrecondition(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for round := range 5 {
		cur := readFile(t, filepath.Join(root, "a.txt"))
		const n = 16
		var wg sync.WaitGroup
		results := make([]reply, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Two spellings of one entry must share its lock.
				path := "a.txt"
				if i%2 == 1 {
					path = "sub/../a.txt"
				}
				results[i] = s.call("fs_write", map[string]any{"path": path,
					"content": fmt.Sprintf("round %d writer %d\n", round, i), "if_sha256": sha(cur)})
			}()
		}
		wg.Wait()
		winners := 0
		var won string
		for i, r := range results {
			switch {
			case !r.isError:
				winners++
				won = fmt.Sprintf("round %d writer %d\n", round, i)
			case r.code() != "precondition_failed":
				t.Errorf("writer %d: %s", i, r.text)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d writers succeeded, want exactly 1", round, winners)
		}
		if got := readFile(t, filepath.Join(root, "a.txt")); string(got) != won {
			t.Fatalf("round %d: file holds %q, the winner wrote %q", round, got, won)
		}
	}
	noTempFiles(t, root)
}

// A rename to another filesystem is refused as unsupported, never copied.
func TestMoveCrossDevice(t *testing.T) {
	root, _ := tree(t)
	mnt := filepath.Join(root, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs to test a cross-device rename: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	s := start(t, root)
	r := s.wantErr("fs_move", map[string]any{"from": "a.txt", "to": "mnt/a.txt"}, "unsupported")
	if !strings.Contains(r.text, "different filesystems") {
		t.Errorf("cross-device move: %s", r.text)
	}
	if got := readFile(t, filepath.Join(root, "a.txt")); string(got) != "hello\n" {
		t.Errorf("a.txt = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(mnt, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a copy was made: %v", err)
	}
	// Writes inside the other filesystem work like anywhere else.
	s.wantOK("fs_write", map[string]any{"path": "mnt/f", "content": "on tmpfs", "if_sha256": nil})
	s.wantOK("fs_write", map[string]any{"path": "mnt/f", "content": "again", "if_sha256": sha([]byte("on tmpfs"))})
	noTempFiles(t, root)
}

// Under --read-only the write tools are not offered, and the worker's
// Landlock ruleset refuses writes even from code inside the worker that
// bypasses os.Root.
func TestReadOnlyHasNoWriteTools(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root, "--read-only")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.session.ListTools(ctx, &mcp.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		switch tl.Name {
		case "fs_write", "fs_replace", "fs_mkdir", "fs_move", "fs_delete":
			t.Errorf("--read-only lists %s", tl.Name)
		}
		if !tl.Annotations.ReadOnlyHint {
			t.Errorf("--read-only lists %s, which is not read-only", tl.Name)
		}
	}
	r := s.wantOK("fs_stat", map[string]any{"path": ""})
	if c := r.doc["confinement"].(map[string]any); c["read_only_enforced"] != true {
		t.Errorf("confinement = %v, want read_only_enforced", c)
	}
	for _, target := range []string{filepath.Join(root, "a.txt"), filepath.Join(root, "created.txt")} {
		r := s.wantErr("fs_stat", map[string]any{"path": hookPrefix + "write:" + target}, "internal")
		if !strings.Contains(r.text, "permission denied") {
			t.Errorf("worker write hook on %s under --read-only: %s", target, r.text)
		}
	}
	if got := readFile(t, filepath.Join(root, "a.txt")); string(got) != "hello\n" {
		t.Errorf("a.txt = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "created.txt")); !os.IsNotExist(err) {
		t.Errorf("created.txt exists: %v", err)
	}
	// Calling a write tool by name is a protocol-level unknown tool.
	if _, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_write",
		Arguments: map[string]any{"path": "a.txt", "content": "x", "if_sha256": nil}}); err == nil {
		t.Error("fs_write was callable under --read-only")
	}
}

func TestWriteToolAnnotations(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.session.ListTools(ctx, &mcp.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]bool{ // destructive, idempotent
		"fs_write": {true, false}, "fs_replace": {true, false}, "fs_mkdir": {false, true},
		"fs_move": {true, false}, "fs_delete": {true, false},
	}
	seen := 0
	for _, tl := range res.Tools {
		w, ok := want[tl.Name]
		if !ok {
			continue
		}
		seen++
		a := tl.Annotations
		if a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint != w[0] || a.IdempotentHint != w[1] ||
			a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s annotations = %+v", tl.Name, a)
		}
		if tl.Name == "fs_write" || tl.Name == "fs_replace" {
			schema := fmt.Sprint(tl.InputSchema)
			if !strings.Contains(schema, "if_sha256") {
				t.Errorf("%s schema lacks if_sha256: %s", tl.Name, schema)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("tools/list has %d of the %d write tools", seen, len(want))
	}
}

// startAs is start with the front-end (and so the worker) running as
// uid:gid. It execs /proc/self/exe, which the kernel resolves without
// checking the search permission of the test binary's directories.
func startAs(t *testing.T, root string, uid, gid uint32) *server {
	t.Helper()
	cmd := fsmcpCommand(root, stateDirIn(t, filepath.Dir(root), int(uid), int(gid)))
	cmd.Path = "/proc/self/exe"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "fsmcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect as uid %d: %v\nstderr:\n%s", uid, err, stderr.String())
	}
	t.Cleanup(func() { session.Close() })
	return &server{t: t, cmd: cmd, session: session, stderr: stderr}
}

// Real cases of metadata an unprivileged worker cannot preserve: a
// security.* attribute (setting one needs CAP_SYS_ADMIN), a group the
// worker's uid is not in, and an owner other than itself. Each write is
// refused with unsupported, naming what, and the file is left unchanged.
func TestWriteUnsupportedMetadataUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to prepare files that an unprivileged uid then cannot rewrite")
	}
	const nobody = 65534
	base, err := os.MkdirTemp("", "fsmcp-uid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	root := filepath.Join(base, "root")
	for _, d := range []string{base, root} {
		os.Mkdir(d, 0o755)
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(root, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, uid, gid int, mode os.FileMode, xattrs map[string]string) string {
		p := filepath.Join(root, name)
		writeFile(t, p, []byte(name+" old\n"), mode)
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		for k, v := range xattrs {
			if err := unix.Setxattr(p, k, []byte(v), 0); err != nil {
				t.Fatalf("setxattr %s: %v", k, err)
			}
		}
		return p
	}
	cases := []struct{ name, what string }{
		{mk("security.txt", nobody, nobody, 0o644, map[string]string{"security.fsmcptest": "label", "user.kept": "1"}), "extended attribute security.fsmcptest"},
		{mk("group.txt", nobody, 1234, 0o664, nil), "the group (gid 1234)"},
		{mk("owner.txt", 1234, nobody, 0o666, nil), "the owner (uid 1234)"},
	}
	okFile := mk("fine.txt", nobody, nobody, 0o640, map[string]string{"user.kept": "yes"})
	before := snapshot(t, root)
	beforeX := map[string]map[string]string{}
	for _, c := range cases {
		beforeX[c.name] = xattrList(t, c.name)
	}
	s := startAs(t, root, nobody, nobody)
	for _, c := range cases {
		name := filepath.Base(c.name)
		r := s.wantErr("fs_write", map[string]any{"path": name, "content": "new\n", "if_sha256": sha([]byte(name + " old\n"))}, "unsupported")
		if !strings.Contains(r.text, c.what) {
			t.Errorf("fs_write(%s) = %s, want it to name %s", name, r.text, c.what)
		}
		s.wantErr("fs_replace", map[string]any{"path": name, "if_sha256": sha([]byte(name + " old\n")),
			"edits": []any{map[string]any{"old": "old", "new": "new"}}}, "unsupported")
		if got := xattrList(t, c.name); fmt.Sprint(got) != fmt.Sprint(beforeX[c.name]) {
			t.Errorf("%s: xattrs %q, want %q", name, got, beforeX[c.name])
		}
	}
	sameSnapshot(t, "the root", before, snapshot(t, root))
	noTempFiles(t, root)
	// What an unprivileged worker may set, it keeps.
	s.wantOK("fs_write", map[string]any{"path": "fine.txt", "content": "new\n", "if_sha256": sha([]byte("fine.txt old\n"))})
	var st syscall.Stat_t
	syscall.Stat(okFile, &st)
	if x := xattrList(t, okFile); x["user.kept"] != "yes" || st.Mode&0o7777 != 0o640 || st.Uid != nobody {
		t.Errorf("fine.txt after an unprivileged write: xattrs %q mode %o uid %d", x, st.Mode&0o7777, st.Uid)
	}
	// A new file is owned by the worker's uid.
	s.wantOK("fs_write", map[string]any{"path": "new.txt", "content": "x", "if_sha256": nil})
	syscall.Stat(filepath.Join(root, "new.txt"), &st)
	if st.Uid != nobody || st.Mode&0o7777 != 0o644 {
		t.Errorf("new.txt: uid %d mode %o", st.Uid, st.Mode&0o7777)
	}
}

// Names that are not UTF-8 are written, replaced, moved and deleted through
// the _base64 twins, and echoed back as *_base64.
func TestWriteToolsNonUTF8Names(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	name, moved, dir := "w\xff.txt", "m\xfe.txt", "d\xfd"
	r := s.wantOK("fs_write", map[string]any{"path_base64": b64(name), "content": "x", "if_sha256": nil})
	if r.str("path_base64") != b64(name) {
		t.Errorf("fs_write reply %s", r.text)
	}
	s.wantOK("fs_replace", map[string]any{"path_base64": b64(name), "if_sha256": sha([]byte("x")),
		"edits": []any{map[string]any{"old": "x", "new": "y"}}})
	s.wantOK("fs_mkdir", map[string]any{"path_base64": b64(dir)})
	r = s.wantOK("fs_move", map[string]any{"from_base64": b64(name), "to_base64": b64(dir + "/" + moved)})
	if r.str("from_base64") != b64(name) || r.str("to_base64") != b64(dir+"/"+moved) {
		t.Errorf("fs_move reply %s", r.text)
	}
	if got := readFile(t, filepath.Join(root, dir, moved)); string(got) != "y" {
		t.Errorf("moved file = %q", got)
	}
	s.wantErr("fs_move", map[string]any{"from": "a.txt", "from_base64": b64("a.txt"), "to": "b"}, "invalid_argument")
	s.wantOK("fs_delete", map[string]any{"path_base64": b64(dir), "recursive": true})
	if _, err := os.Lstat(filepath.Join(root, dir)); !os.IsNotExist(err) {
		t.Errorf("%q still exists: %v", dir, err)
	}
}

// A full filesystem is too_large: the write is refused whole, the old
// content stays, and no temp file is left behind.
func TestWriteNoSpace(t *testing.T) {
	root, _ := tree(t)
	mnt := filepath.Join(root, "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	s := start(t, root)
	s.wantOK("fs_write", map[string]any{"path": "small/f", "content": "fits", "if_sha256": nil})
	big := strings.Repeat("x", 1<<20)
	s.wantErr("fs_write", map[string]any{"path": "small/f", "content": big, "if_sha256": sha([]byte("fits"))}, "too_large")
	s.wantErr("fs_write", map[string]any{"path": "small/g", "content": big, "if_sha256": nil}, "too_large")
	if got := readFile(t, filepath.Join(mnt, "f")); string(got) != "fits" {
		t.Errorf("small/f = %.20q after a refused write", got)
	}
	if _, err := os.Lstat(filepath.Join(mnt, "g")); !os.IsNotExist(err) {
		t.Errorf("small/g exists after a refused create: %v", err)
	}
	noTempFiles(t, root)
}
