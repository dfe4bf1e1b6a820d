package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Symlink loops and chains: a chain inside the root is followed, a loop is
// a clear error and never hangs.
func TestSymlinkLoopsAndChains(t *testing.T) {
	root, _ := tree(t)
	for name, target := range map[string]string{"chain1": "chain2", "chain2": "link_in", "loop1": "loop2", "loop2": "loop1", "chain_out": "link_out"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, root)
	if r := s.wantOK("fs_read", map[string]any{"path": "chain1"}); r.str("content") != "hello\n" {
		t.Errorf("fs_read through a chain = %s", r.text)
	}
	s.wantErr("fs_read", map[string]any{"path": "loop1"}, "invalid_argument")
	s.wantErr("fs_list", map[string]any{"path": "loop1"}, "invalid_argument")
	s.wantErr("fs_read", map[string]any{"path": "chain_out"}, "outside_root")
	if r := s.wantOK("fs_stat", map[string]any{"path": "loop1"}); r.str("type") != "symlink" {
		t.Errorf("fs_stat(loop1) = %s", r.text)
	}
}

// Sockets and devices are reported by fs_stat and never opened by fs_read.
func TestSpecialFiles(t *testing.T) {
	root, _ := tree(t)
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A character device with /dev/zero's numbers: were fs_read to open
	// and read it, it would never end.
	if err := unix.Mknod(filepath.Join(root, "zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
		t.Skipf("mknod needs CAP_MKNOD: %v", err)
	}
	s := start(t, root)
	for name, typ := range map[string]string{"sock": "socket", "zero": "device"} {
		if r := s.wantOK("fs_stat", map[string]any{"path": name}); r.str("type") != typ || r.doc["sha256"] != nil {
			t.Errorf("fs_stat(%s) = %s", name, r.text)
		}
		s.wantErr("fs_read", map[string]any{"path": name}, "not_regular")
	}
}

// Names are bytes: no case folding, no Unicode normalisation.
func TestNamesAreBytes(t *testing.T) {
	root, _ := tree(t)
	nfc, nfd := "caf\u00e9", "cafe\u0301"
	if err := os.WriteFile(filepath.Join(root, nfc), []byte("nfc"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	if r := s.wantOK("fs_read", map[string]any{"path": nfc}); r.str("content") != "nfc" {
		t.Errorf("fs_read(NFC) = %s", r.text)
	}
	s.wantErr("fs_read", map[string]any{"path": nfd}, "not_found")
	s.wantErr("fs_read", map[string]any{"path": "A.TXT"}, "not_found")
	// A newline in a name is listed intact.
	if err := os.WriteFile(filepath.Join(root, "two\nlines"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := s.wantOK("fs_list", map[string]any{"path": ""}); !strings.Contains(r.text, `"two\nlines"`) {
		t.Errorf("fs_list does not show the name with a newline: %s", r.text)
	}
	if r := s.wantOK("fs_glob", map[string]any{"path": "", "pattern": "two*"}); !strings.Contains(r.text, `"two\nlines"`) {
		t.Errorf("fs_glob does not show the name with a newline: %s", r.text)
	}
}

// Read and search tools under a race: a directory inside the root is swapped, over
// and over, with a symlink to a canary directory outside. No reply ever
// carries canary bytes and the canary is unchanged. A call that meets the
// symlink half-way may fail (os.Root reports ELOOP then), never leak.
func TestReadToolsRace(t *testing.T) {
	root, outside := tree(t)
	canary := filepath.Join(outside, "secret.txt")
	dir, link := filepath.Join(root, "swap"), filepath.Join(root, "swap_link")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside", link); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	swaps := 0
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
			swaps++
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	calls := 0
	for time.Now().Before(deadline) {
		for _, c := range []struct {
			tool string
			path string
		}{{"fs_read", "swap/secret.txt"}, {"fs_stat", "swap/secret.txt"}, {"fs_list", "swap"}, {"fs_glob", "swap"}, {"fs_grep", "swap"}} {
			args := map[string]any{"path": c.path}
			switch c.tool {
			case "fs_glob":
				args["pattern"] = "*"
			case "fs_grep":
				args["pattern"] = "secret|inside"
			}
			r := s.call(c.tool, args)
			calls++
			if strings.Contains(r.text, "outside secret") || strings.Contains(r.text, outside) {
				t.Fatalf("%s(%s) leaked the outside: %s", c.tool, c.path, r.text)
			}
			if r.isError && !strings.Contains("outside_root not_found not_a_directory invalid_argument", r.code()) {
				t.Errorf("%s(%s) = %s", c.tool, c.path, r.text)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if b, _ := os.ReadFile(canary); string(b) != "outside secret\n" {
		t.Fatalf("canary changed: %q", b)
	}
	t.Logf("%d calls against %d swaps", calls, swaps)
}
