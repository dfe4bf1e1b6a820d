package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// scripts/release builds the same bytes twice: two runs into two
// directories give the same SHA256SUMS, static, and the binary's --version
// names the commit it was built from. The test builds linux/amd64 only
// (FSMCP_RELEASE_ARCHS): a cold arm64 build takes minutes on two cores.
func TestContactReleaseReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fsmcp twice")
	}
	var sums [2][]byte
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for i, dir := range dirs {
		cmd := exec.Command("../../scripts/release", dir)
		cmd.Env = append(os.Environ(), "FSMCP_RELEASE_ARCHS=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/release: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = b
	}
	t.Logf("SHA256SUMS:\n%s", sums[0])
	if !bytes.Equal(sums[0], sums[1]) {
		t.Errorf("two release builds differ:\n%s\n%s", sums[0], sums[1])
	}
	if n := strings.Count(string(sums[0]), "fsmcp-linux-amd64"); n != 1 {
		t.Errorf("SHA256SUMS lists %d amd64 binaries, want 1", n)
	}
	for _, arch := range []string{"amd64"} {
		f, err := elf.Open(filepath.Join(dirs[0], "fsmcp-linux-"+arch))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("fsmcp-linux-%s is dynamically linked", arch)
			}
		}
		f.Close()
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git revision to compare --version with: %v", err)
	}
	dirs2, _ := exec.Command("git", "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir").Output()
	if d := strings.Fields(string(dirs2)); len(d) == 2 && d[0] != d[1] {
		t.Skip("a linked git worktree: the Go toolchain stamps no VCS revision there, so --version cannot show one")
	}
	out, _ := exec.Command(filepath.Join(dirs[0], "fsmcp-linux-amd64"), "--version").Output()
	want := regexp.MustCompile(`(?m)^module github\.com/fsmcp/fsmcp \S+, revision ` + strings.TrimSpace(string(head)))
	if !want.Match(out) {
		t.Errorf("--version of the release build = %q, want the module and revision %s", out, head)
	}
}

// The container recipe: scripts/container puts a static fsmcp, rg and
// every library rg loads into the build context, the Containerfile starts
// FROM scratch and runs as an unprivileged user; where podman can build
// and run containers here, the image serves a session on a read-only root
// filesystem.
func TestContactContainerRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fsmcp and an image")
	}
	ctx := t.TempDir()
	cmd := exec.Command("../../scripts/container")
	cmd.Env = append(os.Environ(), "FSMCP_CONTEXT="+ctx)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/container: %v\n%s", err, out)
	}
	rootfs := filepath.Join(ctx, "dist", "rootfs")
	f, err := elf.Open(filepath.Join(rootfs, "usr/local/bin/fsmcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the image's fsmcp is dynamically linked")
		}
	}
	f.Close()
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Fatal(err)
	}
	ldd, err := exec.Command("ldd", rg).Output()
	if err != nil {
		t.Fatal(err)
	}
	libs := regexp.MustCompile(`/\S+`).FindAllString(string(ldd), -1)
	for _, p := range append([]string{"/usr/bin/rg"}, libs...) {
		if _, err := os.Stat(filepath.Join(rootfs, p)); err != nil {
			t.Errorf("the image lacks %s, which rg needs: %v", p, err)
		}
	}
	recipe, err := os.ReadFile("../../Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nFROM scratch\n", "\nUSER 65532:65532\n", `ENTRYPOINT ["/usr/local/bin/fsmcp"]`} {
		if !strings.Contains(string(recipe), want) {
			t.Errorf("Containerfile lacks %q", want)
		}
	}
	if passwd, _ := os.ReadFile(filepath.Join(rootfs, "etc/passwd")); !strings.Contains(string(passwd), ":65532:65532:") {
		t.Errorf("the image's /etc/passwd has no user 65532: %q", passwd)
	}

	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman is not installed: the recipe's contents are checked, the image is not built")
	}
	tag := fmt.Sprintf("localhost/fsmcp-test-%d", os.Getpid())
	build := exec.Command(podman, "build", "-q", "-t", tag, "-f", "../../Containerfile", ctx)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", tag).Run() })
	user, err := exec.Command(podman, "image", "inspect", "--format", "{{.Config.User}}", tag).Output()
	if err != nil || strings.TrimSpace(string(user)) != "65532:65532" {
		t.Errorf("the image runs as %q (%v), want 65532:65532", user, err)
	}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "a.txt"), []byte("in the container\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(data, 0o777)
	// Without CAP_SYS_RESOURCE (as here, inside another container) the
	// runtime cannot raise the rlimits podman asks for by default, so the
	// run asks for what the test already has; crun also refuses a hybrid
	// cgroup hierarchy, which runc accepts.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--rm", "-i", "--read-only", "--network=none",
		"--ulimit", fmt.Sprintf("nofile=%d:%d", lim.Max, lim.Max), "--ulimit", "nproc=1024:1024"}
	if runc, err := exec.LookPath("runc"); err == nil {
		args = append(args, "--runtime", runc)
	}
	run := exec.Command(podman, append(args, "-v", data+":/data", tag, "--root", "/data")...)
	run.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs_read","arguments":{"path":"a.txt"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs_grep","arguments":{"path":"","pattern":"contain"}}}` + "\n")
	out, err := run.CombinedOutput()
	if err != nil && strings.Contains(string(out), "OCI ") {
		t.Skipf("podman builds the image but cannot run containers here: %s", strings.TrimSpace(string(out)))
	}
	// The read returns the file; the search ran rg inside the container,
	// under the worker's Landlock domain.
	if err != nil || !strings.Contains(string(out), `in the container\\n`) ||
		!strings.Contains(string(out), `\"path\":\"a.txt\",\"line_number\":1`) {
		t.Errorf("podman run: %v\n%s", err, out)
	}
}
