package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
// FROM scratch and runs as an unprivileged user. Then, for podman and for
// docker where each runs here, the commands of docs/INTEGRATION.md's
// "Container" section run as written: the build, the token file, and the
// run line for this runtime and user, in a fresh HOME and served
// directory. A go-sdk client initializes over HTTP with the token, fs_grep
// runs rg inside the container, fs_write creates a file that the host
// sees owned by the user who ran the command, the mounted state directory
// holds the root's subdirectory, and an interrupt, as Ctrl-C sends, stops
// fsmcp and leaves no container behind.
func TestContactContainerRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fsmcp and an image")
	}
	doc := containerDoc(t)
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
	for _, engine := range []string{"podman", "docker"} {
		t.Run(engine, func(t *testing.T) { runDocumentedContainer(t, doc, engine, ctx) })
	}
}

// containerBlocks are the shell blocks of docs/INTEGRATION.md's
// "Container" section.
type containerBlocks struct {
	build, token, podman, docker string
}

var shellBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// containerDoc reads the section's blocks and checks that its two run
// lines differ only in the runtime and the user flag, so that what is
// tested of one holds for the other.
func containerDoc(t *testing.T) containerBlocks {
	t.Helper()
	b, err := os.ReadFile("../../docs/INTEGRATION.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Container\n")
	if !ok {
		t.Fatal("docs/INTEGRATION.md has no Container section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var d containerBlocks
	for _, m := range shellBlock.FindAllStringSubmatch(section, -1) {
		switch block := m[1]; {
		case strings.HasPrefix(block, "scripts/container build"):
			d.build = block
		case strings.Contains(block, "/dev/urandom"):
			d.token = block
		case strings.HasPrefix(block, "podman run "):
			d.podman = block
		case strings.HasPrefix(block, "docker run "):
			d.docker = block
		}
	}
	if d.build == "" || d.token == "" || d.podman == "" || d.docker == "" {
		t.Fatalf("the Container section lacks a block (build, token, podman run, docker run): %+v", d)
	}
	asPodman := strings.Replace(strings.Replace(d.docker, "docker run ", "podman run ", 1),
		dockerUser, podmanUser, 1)
	if asPodman != d.podman {
		t.Errorf("the podman and docker lines differ in more than the runtime and %s / %s:\n%s\n%s",
			podmanUser, dockerUser, d.podman, d.docker)
	}
	return d
}

// The user flags of the section's run lines, and the one it gives for
// rootless docker.
const (
	podmanUser         = "--userns=keep-id:uid=65532,gid=65532"
	dockerUser         = `--user "$(id -u):$(id -g)"`
	rootlessDockerUser = "--user 0:0"
)

// runDocumentedContainer builds the image and runs the section's line for
// engine as this process's user, in a fresh HOME and served directory.
func runDocumentedContainer(t *testing.T, d containerBlocks, engine, ctx string) {
	path, err := exec.LookPath(engine)
	if err != nil {
		t.Skipf("%s is not installed", engine)
	}
	var stderr bytes.Buffer
	infoCmd := exec.Command(path, "info", "--format", "{{json .}}")
	infoCmd.Stderr = &stderr
	info, err := infoCmd.Output()
	if err != nil {
		t.Skipf("%s info: %v: %s", engine, err, bytes.TrimSpace(stderr.Bytes()))
	}
	// The line as the section gives it for this runtime and user.
	line := d.docker
	switch {
	case engine == "podman" && os.Geteuid() != 0:
		line = d.podman
	case engine == "podman":
		line = strings.Replace(line, "docker run ", "podman run ", 1)
	case bytes.Contains(info, []byte("rootless")):
		line = strings.Replace(line, dockerUser, rootlessDockerUser, 1)
	}
	var env []string
	if engine == "podman" && !hasCapability(t, unix.CAP_SYS_RESOURCE) {
		// Inside another container without CAP_SYS_RESOURCE (as where
		// this was written) podman as root cannot raise RLIMIT_NOFILE and
		// RLIMIT_NPROC to its defaults; the section's last note says to
		// set podman's defaults to limits it has: the open files this
		// process may have, and 32768 processes, the limit podman 4.3
		// itself runs with there. runc, where installed, also stands in
		// for crun, which refuses a hybrid cgroup hierarchy.
		var nofile syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=32768:32768\"]\n", nofile.Max, nofile.Max)
		if runc, err := exec.LookPath("runc"); err == nil {
			conf += fmt.Sprintf("[engine]\nruntime = %q\n", runc)
		}
		name := filepath.Join(t.TempDir(), "containers.conf")
		if err := os.WriteFile(name, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		env = append(env, "CONTAINERS_CONF="+name)
	}

	build := exec.Command("bash", "-euo", "pipefail", "-c", d.build)
	build.Dir = "../.."
	build.Env = append(os.Environ(), append(env, "FSMCP_CONTEXT="+ctx, "FSMCP_ENGINE="+path)...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", d.build, err, out)
	}
	t.Cleanup(func() { exec.Command(path, "rmi", "fsmcp").Run() })
	before := containerIDs(t, path)
	t.Cleanup(func() {
		for _, id := range containerIDs(t, path) {
			if !slices.Contains(before, id) {
				exec.Command(path, "rm", "-f", id).Run()
			}
		}
	})

	// A fresh HOME for the token; the runtimes keep their images and
	// settings where they had them.
	home, data := t.TempDir(), t.TempDir()
	realHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]string{"XDG_DATA_HOME": ".local/share", "XDG_CONFIG_HOME": ".config"}
	if engine == "docker" {
		keep = map[string]string{"DOCKER_CONFIG": ".docker"}
	}
	for v, dir := range keep {
		if os.Getenv(v) == "" {
			env = append(env, v+"="+filepath.Join(realHome, dir))
		}
	}
	env = append(os.Environ(), append(env, "HOME="+home)...)
	token := exec.Command("bash", "-euo", "pipefail", "-c", d.token)
	token.Env = env
	if out, err := token.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", d.token, err, out)
	}
	if err := os.WriteFile(filepath.Join(data, "a.txt"), []byte("in the container\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		t.Skipf("the documented line publishes 127.0.0.1:8080, which is in use here: %v", err)
	}
	l.Close()

	run := exec.Command("bash", "-euo", "pipefail", "-c", line)
	run.Dir, run.Env = data, env
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	h := runHTTP(t, run, "bound")
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		syscall.Kill(-run.Process.Pid, syscall.SIGINT)
		select {
		case <-h.exited:
		case <-time.After(60 * time.Second):
			t.Errorf("%s run did not stop within 60 s of an interrupt", engine)
			syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
		}
	}
	t.Cleanup(stop)
	tok, err := os.ReadFile(filepath.Join(home, ".config/fsmcp/token"))
	if err != nil {
		t.Fatal(err)
	}
	h.base, h.token = "http://127.0.0.1:8080", strings.TrimSpace(string(tok))
	s := h.connect("")
	r := s.wantOK("fs_grep", map[string]any{"path": ".", "pattern": "contain"})
	if !strings.Contains(r.text, `"path":"a.txt","line_number":1`) {
		t.Errorf("fs_grep in the container found no match in a.txt: %s", r.text)
	}
	s.wantOK("fs_write", map[string]any{"path": "new.txt", "content": "from the container\n", "if_sha256": nil})
	fi, err := os.Stat(filepath.Join(data, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Getuid() {
		t.Errorf("the file fsmcp wrote is owned by uid %d on the host, want %d (who ran the command)", uid, os.Getuid())
	}
	checkContainerProcess(t, path, before)
	if subs, _ := filepath.Glob(filepath.Join(home, ".local/state/fsmcp/root-*")); len(subs) != 1 {
		t.Errorf("the state directory on the host has %v, want the root's one subdirectory", subs)
	}
	s.session.Close()
	// Rootless podman 4.3 runs as two processes that both forward the
	// interrupt, and the second, finding the container gone, exits 1: the
	// exit status says nothing of fsmcp, the containers left do.
	stop()
	t.Logf("%s run exited with %v after an interrupt", engine, h.cmd.ProcessState)
	for _, id := range containerIDs(t, path) {
		if !slices.Contains(before, id) {
			t.Errorf("container %s is left after the interrupt", id)
		}
	}
}

// checkContainerProcess checks, from the host's /proc, what the documented
// line promises of the one container started since before: fsmcp runs as
// this process's user with no capability on a read-only root filesystem,
// and port 8080 listens on loopback only.
func checkContainerProcess(t *testing.T, engine string, before []string) {
	var ids []string
	for _, id := range containerIDs(t, engine) {
		if !slices.Contains(before, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%d new containers, want 1: %v", len(ids), ids)
	}
	out, err := exec.Command(engine, "inspect", "--format", "{{.State.Pid}}", ids[0]).Output()
	if err != nil {
		t.Fatalf("%s inspect: %v", engine, err)
	}
	pid := strings.TrimSpace(string(out))
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^Uid:\s+(\d+).*$`).FindSubmatch(status); m == nil || string(m[1]) != strconv.Itoa(os.Getuid()) {
		t.Errorf("fsmcp in the container runs on the host as %q, want uid %d", m, os.Getuid())
	}
	if !regexp.MustCompile(`(?m)^CapEff:\s+0+$`).Match(status) {
		t.Errorf("fsmcp in the container has capabilities:\n%s", status)
	}
	mounts, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\S+ \S+ \S+ \S+ / ro[, ]`).Match(mounts) {
		t.Errorf("the container's root filesystem is not read-only:\n%s", mounts)
	}
	listeners := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// local_address is ADDR:1F90 for port 8080; state 0A is LISTEN.
			if len(f) < 4 || f[3] != "0A" || !strings.HasSuffix(f[1], ":1F90") {
				continue
			}
			listeners++
			if addr := strings.TrimSuffix(f[1], ":1F90"); addr != "0100007F" && addr != "00000000000000000000000001000000" {
				t.Errorf("port 8080 listens on %s (%s), not loopback only", addr, table)
			}
		}
	}
	if listeners == 0 {
		t.Errorf("nothing on the host listens on port 8080 while the container serves it")
	}
}

// containerIDs lists every container engine knows of, running or not.
func containerIDs(t *testing.T, engine string) []string {
	out, err := exec.Command(engine, "ps", "-a", "-q", "--no-trunc").Output()
	if err != nil {
		t.Errorf("%s ps: %v", engine, err)
	}
	return strings.Fields(string(out))
}

// hasCapability reports whether this process has capability c in its
// effective set.
func hasCapability(t *testing.T, c int) bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CapEff:\s*([0-9a-f]+)$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no CapEff in /proc/self/status:\n%s", status)
	}
	eff, err := strconv.ParseUint(string(m[1]), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return eff&(1<<c) != 0
}
