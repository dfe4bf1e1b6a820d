package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// extent is one FIEMAP extent of a file.
type extent struct {
	logical, physical, length uint64
	flags                     uint32
}

const (
	fsIocFiemap        = 0xC020660B // _IOWR('f', 11, struct fiemap)
	fiemapFlagSync     = 0x1
	fiemapExtentLast   = 0x1
	fiemapExtentShared = 0x2000
)

// fiemap returns the extents of the file at p, after syncing it, from the
// kernel's FS_IOC_FIEMAP.
func fiemap(t *testing.T, p string) []extent {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const batch = 64
	// struct fiemap (32 bytes) followed by batch struct fiemap_extent (56 bytes each).
	buf := make([]uint64, (32+56*batch)/8)
	var out []extent
	start := uint64(0)
	for {
		clear(buf)
		buf[0], buf[1] = start, ^uint64(0)
		hdr := (*[4]uint32)(unsafe.Pointer(&buf[2]))
		hdr[0], hdr[2] = fiemapFlagSync, batch // fm_flags, fm_extent_count
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
			t.Fatalf("FIEMAP %s: %v", p, errno)
		}
		n := int(hdr[1]) // fm_mapped_extents
		last := false
		for i := range n {
			e := buf[4+i*7:]
			x := extent{logical: e[0], physical: e[1], length: e[2], flags: uint32(e[5])}
			out = append(out, x)
			start = x.logical + x.length
			last = last || x.flags&fiemapExtentLast != 0
		}
		if n == 0 || last {
			return out
		}
	}
}

// physicalAt maps the byte range [from, to) of a file with extents ext to
// physical ranges, and whether every byte of it is in an extent flagged
// shared.
func physicalAt(ext []extent, from, to uint64) ([][2]uint64, bool) {
	var ranges [][2]uint64
	shared := true
	for _, e := range ext {
		lo, hi := max(from, e.logical), min(to, e.logical+e.length)
		if lo >= hi {
			continue
		}
		ranges = append(ranges, [2]uint64{e.physical + lo - e.logical, e.physical + hi - e.logical})
		shared = shared && e.flags&fiemapExtentShared != 0
	}
	covered := uint64(0)
	for _, r := range ranges {
		covered += r[1] - r[0]
	}
	return ranges, shared && covered == to-from
}

// mountXFS makes an XFS image with reflinks, mounts it on a loop device and
// returns the mount point; the unmount is a cleanup, registered before any
// server on it starts, so it runs after that server has stopped. It skips,
// saying why, where this cannot be done.
func mountXFS(t *testing.T) string {
	t.Helper()
	return mountImage(t, "mkfs.xfs", "xfsprogs", 512<<20, "-q", "-m", "reflink=1")
}

// mountImage makes a filesystem image of size bytes with mkfs (from the
// Debian package pkg) and args, and loop-mounts it as mountXFS does.
func mountImage(t *testing.T, mkfs, pkg string, size int64, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	prog, err := exec.LookPath(mkfs)
	if err != nil {
		t.Skipf("%s is not installed (scripts/test.sh installs %s)", mkfs, pkg)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Create(img); err != nil {
		t.Fatal(err)
	} else if err := errors.Join(f.Truncate(size), f.Close()); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(prog, append(args, img)...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", mkfs, args, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount a %s image here: %v: %s", mkfs, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		for i := 0; ; i++ {
			out, err := exec.Command("umount", mnt).CombinedOutput()
			if err == nil {
				return
			}
			if i == 50 {
				// Detach it anyway, so no mount outlives the test.
				exec.Command("umount", "-l", mnt).Run()
				t.Errorf("umount %s: %v: %s", mnt, err, out)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return mnt
}

// On XFS with reflinks, a splice and a copy share the extents of the
// original file rather than copying them: every unchanged block of the new
// file is the original's own physical block, flagged shared by FIEMAP. The
// bytes and each reply's sha256 are exact. (An append writes in place, in
// the same inode: it copies nothing.)
func TestEditReflinkSharesExtents(t *testing.T) {
	mnt := mountXFS(t)
	root := filepath.Join(mnt, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 4 << 20
	orig := make([]byte, size)
	for i := range orig {
		orig[i] = byte(i*7 + i>>12)
	}
	writeFile(t, filepath.Join(root, "orig"), orig, 0o644)
	f, err := os.Open(filepath.Join(root, "orig"))
	if err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
	// The file a splice replaces is a second name of orig: the replaced
	// inode lives on as orig, so sharing is seen against it.
	for _, n := range []string{"spl"} {
		if err := os.Link(filepath.Join(root, "orig"), filepath.Join(root, n)); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, root)

	insert := bytes.Repeat([]byte("S"), 4096)
	r := s.wantOK("fs_splice", map[string]any{"path": "spl", "offset": 1 << 20, "delete": 4096, "insert": string(insert), "if_sha256": sha(orig)})
	wantSpl := append(append(bytes.Clone(orig[:1<<20]), insert...), orig[1<<20+4096:]...)
	if r.str("sha256") != sha(wantSpl) {
		t.Errorf("splice = %s", r.text)
	}
	s.wantOK("fs_copy", map[string]any{"from": "orig", "to": "cp"})

	for name, want := range map[string][]byte{"orig": orig, "spl": wantSpl, "cp": orig} {
		if got := readFile(t, filepath.Join(root, name)); !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, not the expected %d", name, len(got), len(want))
		}
	}
	origExt := fiemap(t, filepath.Join(root, "orig"))
	for _, c := range []struct {
		name     string
		from, to uint64 // a range of the original, at the same offset in the new file
	}{
		{"cp", 0, size},
		{"spl", 0, 1 << 20},
		{"spl", 1<<20 + 4096, size},
	} {
		want, origShared := physicalAt(origExt, c.from, c.to)
		got, shared := physicalAt(fiemap(t, filepath.Join(root, c.name)), c.from, c.to)
		if !origShared || !shared || !equalRanges(got, want) {
			t.Errorf("%s [%d, %d): blocks %v (all shared: %v), the original's %v (all shared: %v): not the original's extents",
				c.name, c.from, c.to, got, shared, want, origShared)
		}
	}
	// The spliced block itself is the new file's own.
	if _, shared := physicalAt(fiemap(t, filepath.Join(root, "spl")), 1<<20, 1<<20+4096); shared {
		t.Error("the spliced block is shared: the insert did not land in a block of its own")
	}
	noTempFiles(t, root)
}

// equalRanges compares physical ranges after merging adjacent ones, since
// two files may split the same blocks into extents differently.
func equalRanges(a, b [][2]uint64) bool {
	merge := func(r [][2]uint64) [][2]uint64 {
		var out [][2]uint64
		for _, x := range r {
			if n := len(out); n > 0 && out[n-1][1] == x[0] {
				out[n-1][1] = x[1]
				continue
			}
			out = append(out, x)
		}
		return out
	}
	a, b = merge(a), merge(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
