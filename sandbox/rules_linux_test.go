package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

const rulesChildEnv = "FSMCP_SANDBOX_RULES_CHILD"

// TestRulesReaderChild is not a test on its own: TestRulesReaderConfinement
// re-runs the test binary with it selected, and it confines itself as the
// rules reader does and reports what it can still do.
func TestRulesReaderChild(t *testing.T) {
	base := os.Getenv(rulesChildEnv)
	if base == "" {
		t.Skip("runs only as the subprocess of TestRulesReaderConfinement")
	}
	dir, err := os.OpenFile(filepath.Join(base, "conf"), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		fmt.Printf("probe setup=%v\n", err)
		return
	}
	if _, _, err := ConfineRulesReader(fmt.Sprintf("/proc/self/fd/%d", dir.Fd())); err != nil {
		fmt.Printf("probe setup=%v\n", err)
		return
	}
	fmt.Println("probe setup=ok")
	open := func(dirfd int, name string, flags int) error {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	for _, p := range []struct {
		name string
		run  func() error
	}{
		{"read-rules", func() error { return open(int(dir.Fd()), "rules", unix.O_RDONLY) }},
		{"read-outside", func() error { return open(unix.AT_FDCWD, filepath.Join(base, "outside"), unix.O_RDONLY) }},
		{"write-rules", func() error { return open(int(dir.Fd()), "rules", unix.O_WRONLY) }},
		{"create-in-dir", func() error { return open(int(dir.Fd()), "new", unix.O_WRONLY|unix.O_CREAT) }},
		{"list-dir", func() error { return open(unix.AT_FDCWD, filepath.Join(base, "conf"), unix.O_RDONLY|unix.O_DIRECTORY) }},
		{"socket", func() error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"exec", func() error { return exec.Command("/bin/true").Run() }},
	} {
		fmt.Printf("probe %s=%s\n", p.name, errText(p.run()))
	}
}

// TestRulesReaderConfinement: the rules reader may read the files of the
// rules file's directory and nothing else: a file outside it, writing or
// creating there, listing the directory, a new socket and running a
// program are all refused by the kernel.
func TestRulesReaderConfinement(t *testing.T) {
	if KernelABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	base := t.TempDir()
	os.Mkdir(filepath.Join(base, "conf"), 0o755)
	for _, f := range []string{"conf/rules", "outside"} {
		if err := os.WriteFile(filepath.Join(base, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, out := probeChild(t, "TestRulesReaderChild", []string{rulesChildEnv + "=" + base}, nil)
	if got["setup"] != "ok" {
		t.Fatalf("setup: %s\n%s", got["setup"], out)
	}
	want := map[string]string{"read-rules": "ok", "read-outside": "EACCES", "write-rules": "EACCES",
		"create-in-dir": "EACCES", "list-dir": "EACCES", "socket": "EPERM"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
	}
	if got["exec"] == "ok" || got["exec"] == "" {
		t.Errorf("exec = %q, want refused", got["exec"])
	}
}
