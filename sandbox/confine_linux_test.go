package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Each layer that keeps commands from changing metadata, alone: the
// command's seccomp filter without any mount namespace, and the runner's
// read-only mounts without any filter. cmd/fsmcp's TestExecMetadata*
// run both together through the real server.

// layerEnv selects what TestCommandLayerChild does in a subprocess.
const layerEnv = "FSMCP_LAYER_CHILD"

// metaOps are the calls that change a file's metadata through fd, each
// named as the parent expects it. fchmod-plain asks for no set-user-ID
// bit; fchown of -1, -1 changes nothing but needs the same permission as
// any chown.
func metaOps(fd int) []probe {
	past := [2]unix.Timespec{unix.NsecToTimespec(1e9), unix.NsecToTimespec(1e9)}
	return []probe{
		{name: "fchmod-setuid", run: func() error { return unix.Fchmod(fd, 0o4777) }},
		{name: "fchmod-plain", run: func() error { return unix.Fchmod(fd, 0o700) }},
		{name: "fchown", run: func() error { return unix.Fchown(fd, -1, -1) }},
		{name: "fsetxattr", run: func() error { return unix.Fsetxattr(fd, "user.fsmcp", []byte("evil"), 0) }},
		{name: "fremovexattr", run: func() error { return unix.Fremovexattr(fd, "user.keep") }},
		{name: "futimens", run: func() error {
			return errno(unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&past[0])), 0, 0, 0))
		}},
		{name: "utimensat-null", run: func() error { return errno(unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0)) }},
		{name: "setflags", run: func() error { return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, 0) }},
	}
}

// attackFile opens file with access mode 3 and for reading, and tries
// metaOps through each descriptor; it prints "probe PREFIXTRICK-OP=ANSWER".
func attackFile(prefix, file string) {
	how := unix.OpenHow{Flags: 3}
	_, err := unix.Openat2(unix.AT_FDCWD, file, &how)
	fmt.Printf("probe %sopenat2-open=%s\n", prefix, errText(err))
	for _, t := range []struct {
		trick string
		flags int
	}{{"mode3", 3}, {"read", unix.O_RDONLY}} {
		fd, err := unix.Open(file, t.flags|unix.O_CLOEXEC, 0)
		fmt.Printf("probe %s%s-open=%s\n", prefix, t.trick, errText(err))
		if err != nil {
			continue
		}
		for _, p := range metaOps(fd) {
			fmt.Printf("probe %s%s-%s=%s\n", prefix, t.trick, p.name, errText(p.run()))
		}
		unix.Close(fd)
	}
}

// TestCommandLayerChild is not a test on its own: it runs as the
// subprocess of the layer tests, with layerEnv naming its part.
func TestCommandLayerChild(t *testing.T) {
	mode, arg := os.Getenv(layerEnv), os.Getenv(layerEnv+"_ARG")
	switch mode {
	case "":
		t.Skip("runs only as the subprocess of the layer tests")
	case "filter-ro", "filter-rw":
		// The filter is the calling thread's, as in the shim.
		runtime.LockOSThread()
		if _, err := filterCommand(mode == "filter-rw", false); err != nil {
			fmt.Printf("probe install=%v\n", err)
			return
		}
		fmt.Println("probe install=ok")
		attackFile("", arg)
	case "mounts":
		// The runner's mount namespace, without Landlock or seccomp.
		root, canary := filepath.SplitList(arg)[0], filepath.SplitList(arg)[1]
		layout, err := EnterExecNamespace(root, ExecMounts{})
		if err != nil {
			fmt.Printf("probe install=%v\n", err)
			return
		}
		fmt.Println("probe install=ok")
		attackFile("", canary)
		attackFile("root-", filepath.Join(ExecRoot, "file"))
		scratch, err := layout.NewScratch()
		if err == nil {
			err = os.WriteFile(filepath.Join(scratch, "f"), nil, 0o600)
		}
		if err == nil {
			err = os.Chmod(filepath.Join(scratch, "f"), 0o644)
		}
		fmt.Printf("probe scratch-chmod=%s\n", errText(err))
		// A process in a command's namespaces, with no filter either.
		cmd := exec.Command(layout.Self, "-test.run=^TestCommandLayerChild$")
		cmd.Env = append(os.Environ(), layerEnv+"=remount")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: commandNS}
		if err := cmd.Run(); err != nil {
			fmt.Printf("probe remount-run=%v\n", err)
		}
	case "remount":
		fmt.Printf("probe remount-root=%s\n", errText(setReadOnly("/", false, 0)))
		fmt.Printf("probe remount-old=%s\n", errText(unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND, "")))
	}
}

// runLayer runs TestCommandLayerChild in mode with arg, with attr, and
// returns its probe answers.
func runLayer(t *testing.T, mode, arg string, attr *syscall.SysProcAttr) map[string]string {
	t.Helper()
	got, out := probeChild(t, "TestCommandLayerChild", []string{layerEnv + "=" + mode, layerEnv + "_ARG=" + arg}, attr)
	if got["install"] != "ok" {
		t.Fatalf("install: %s\n%s", got["install"], out)
	}
	return got
}

// layerCanary is a file with an extended attribute in a new directory
// outside /tmp (the runner covers /tmp), and its metadata as a string.
func layerCanary(t *testing.T) (string, func() string) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "fsmcp-layer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "canary")
	if err := os.WriteFile(file, []byte("canary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(file, "user.keep", []byte("original"), 0); err != nil {
		t.Skipf("no user extended attributes on %s: %v", dir, err)
	}
	return file, func() string {
		var st unix.Stat_t
		if err := unix.Stat(file, &st); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1024)
		n, _ := unix.Listxattr(file, buf)
		return fmt.Sprintf("mode=%o uid=%d mtime=%v xattrs=%q", st.Mode, st.Uid, st.Mtim, buf[:max(n, 0)])
	}
}

func wantProbes(t *testing.T, layer string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s = %q, want %s", layer, k, got[k], w)
		}
	}
}

// The command filter alone, in a process with no other confinement: an
// open with access mode 3 is refused, openat2 answers ENOSYS; with a
// read-only root every descriptor metadata call is refused, and with a
// writable one a set-user-ID mode and the file-flag ioctl still are.
func TestCommandFilterMetadata(t *testing.T) {
	file, snapshot := layerCanary(t)
	before := snapshot()
	got := runLayer(t, "filter-ro", file, nil)
	want := map[string]string{"openat2-open": "ENOSYS", "mode3-open": "EPERM", "read-open": "ok"}
	for _, p := range metaOps(-1) {
		want["read-"+p.name] = "EPERM"
	}
	wantProbes(t, "read-only root", got, want)
	if after := snapshot(); after != before {
		t.Errorf("the file changed:\nbefore %s\nafter  %s", before, after)
	}
	got = runLayer(t, "filter-rw", file, nil)
	wantProbes(t, "writable root", got, map[string]string{"openat2-open": "ENOSYS", "mode3-open": "EPERM",
		"read-fchmod-setuid": "EPERM", "read-setflags": "EPERM", "read-fchmod-plain": "ok"})
}

// The runner's mounts alone, without Landlock or seccomp: everything but
// the scratch is read-only, so no descriptor changes the metadata of a
// file outside the root or in a read-only root (EROFS), while the
// scratch stays writable. A process in a command's user and mount
// namespaces cannot make a mount writable again.
func TestExecMountsReadOnly(t *testing.T) {
	file, snapshot := layerCanary(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot()
	got := runLayer(t, "mounts", root+string(filepath.ListSeparator)+file, execProcAttr())
	want := map[string]string{"mode3-open": "ok", "read-open": "ok", "root-mode3-open": "ok",
		"scratch-chmod": "ok", "remount-root": "EPERM", "remount-old": "EPERM"}
	for _, p := range metaOps(-1) {
		if p.name == "setflags" {
			continue // ext4 answers EROFS, others may not know the ioctl
		}
		want["mode3-"+p.name] = "EROFS"
		want["read-"+p.name] = "EROFS"
		want["root-read-"+p.name] = "EROFS"
	}
	wantProbes(t, "mounts", got, want)
	if after := snapshot(); after != before {
		t.Errorf("the file changed:\nbefore %s\nafter  %s", before, after)
	}
}
