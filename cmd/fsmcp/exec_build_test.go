package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callFor is call with a deadline of d: builds take longer than a file
// tool's minute.
func (s *server) callFor(d time.Duration, args map[string]any) reply {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_exec", Arguments: args})
	if err != nil {
		s.t.Fatalf("fs_exec(%.200v): protocol error %v\nstderr:\n%.2000s", args, err, s.stderr.String())
	}
	return checkReply(s.t, "fs_exec", res)
}

// recipe is one of README's "Builds and tests" recipes: the server's
// flags (without --root) and the fs_exec calls, on project (a directory
// of testdata/recipes; "" for git's repository, which the test makes).
type recipe struct {
	name, project string
	flags         []string
	calls         []map[string]any
}

// Where README's recipes put the root and the cache.
const (
	readmeRoot  = "/home/me/project"
	readmeCache = "/home/me/.cache/fsmcp"
)

var projectLine = regexp.MustCompile("Project: `testdata/recipes/([a-z]+)`")

// readmeRecipes parses README's "Builds and tests" section.
func readmeRecipes(t *testing.T) []recipe {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Builds and tests\n")
	if !ok {
		t.Fatal(`README has no "## Builds and tests" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out []recipe
	for _, part := range strings.Split(section, "\n### ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		r := recipe{name: name}
		if m := projectLine.FindStringSubmatch(body); m != nil {
			r.project = m[1]
		}
		for _, b := range fenced.FindAllStringSubmatch(body, -1) {
			switch b[1] {
			case "sh":
				args, ok := fsmcpArgs(shellWords(strings.ReplaceAll(strings.TrimSpace(b[2]), "\\\n", " ")))
				if !ok || len(args) < 2 || args[0] != "--root" || args[1] != readmeRoot {
					t.Fatalf("recipe %s: the sh block is not `fsmcp --root %s ...`: %s", name, readmeRoot, b[2])
				}
				r.flags = args[2:]
			case "json":
				for _, line := range strings.Split(strings.TrimSpace(b[2]), "\n") {
					var call map[string]any
					if err := json.Unmarshal([]byte(line), &call); err != nil {
						t.Fatalf("recipe %s: %q: %v", name, line, err)
					}
					r.calls = append(r.calls, call)
				}
			}
		}
		if len(r.flags) == 0 || len(r.calls) == 0 {
			t.Fatalf("recipe %s: want an sh block of flags and a json block of calls", name)
		}
		out = append(out, r)
	}
	return out
}

// TestBuildRecipes runs every README recipe, exactly as written, twice
// on its project, through the real binary and go-sdk's client: each call
// must exit 0 both times, and the second go test must come from the
// cache. scripts/recipes prints the "recipe-time" lines it logs.
func TestBuildRecipes(t *testing.T) {
	recipes := readmeRecipes(t)
	var names []string
	for _, r := range recipes {
		names = append(names, r.name)
	}
	want := []string{"Go", "Node", "Python", "Rust", "make and cc", "git"}
	if !slices.Equal(names, want) {
		t.Fatalf("README recipes %q, want %q", names, want)
	}
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			for i, f := range r.flags {
				if i > 0 && (r.flags[i-1] == "--exec" || r.flags[i-1] == "--exec-read") {
					if _, err := os.Stat(f); err != nil {
						t.Skipf("%s is not installed here: %v", f, err)
					}
				}
			}
			root := t.TempDir()
			if r.project == "" {
				gitRepo(t, root)
			} else {
				copyTree(t, filepath.Join("testdata/recipes", r.project), root)
			}
			cache := t.TempDir()
			flags := slices.Clone(r.flags)
			for i, f := range flags {
				if f == readmeCache {
					flags[i] = cache
				}
			}
			s := start(t, root, flags...)
			for _, call := range r.calls {
				var ms [2]int64
				var outs [2]string
				for run := range 2 {
					res := s.callFor(15*time.Minute, call)
					if res.exit(t) != 0 {
						t.Fatalf("run %d of %v: %s", run+1, call["argv"], res.text)
					}
					ms[run], outs[run] = res.num("duration_ms"), string(res.stream(t, "stdout"))
				}
				argv := fmt.Sprint(call["argv"])
				t.Logf("recipe-time\t%s\t%s\t%d\t%d", r.name, argv, ms[0], ms[1])
				if strings.HasPrefix(argv, "[go test") && !strings.Contains(outs[1], "(cached)") {
					t.Errorf("the second go test did not come from the cache: %s", outs[1])
				}
			}
		})
	}
}

// copyTree copies the regular files and directories beneath from into to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gitRepo makes dir a repository with one commit ("first") and a change
// to f not yet staged.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "empty"},
	} {
		gitIn(t, dir, args...)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "f")
	gitIn(t, dir, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "first")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
}

// TestExecGitGranted: a git granted to fs_exec reads no system or global
// configuration (a host's /etc/gitconfig is unreadable to commands), also
// when a shell runs it, and runs none of the repository's programs: a
// required clean filter is switched off, so status and diff work.
func TestExecGitGranted(t *testing.T) {
	root := t.TempDir()
	gitRepo(t, root)
	gitIn(t, root, "config", "filter.evil.clean", "/bin/false")
	gitIn(t, root, "config", "filter.evil.required", "true")
	if err := os.WriteFile(filepath.Join(root, ".git/info/attributes"), []byte("* filter=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--exec", "/usr/bin/git", "--exec", "/bin/sh")
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"git", "log", "--oneline"}, " first\n"},
		{[]string{"sh", "-c", "git log --oneline"}, " first\n"},
		{[]string{"sh", "-c", "echo $GIT_CONFIG_NOSYSTEM $GIT_CONFIG_GLOBAL"}, "1 /dev/null\n"},
		{[]string{"git", "status", "--short"}, " M f\n"},
		{[]string{"git", "diff"}, "+b\n"},
	} {
		r := s.execCall(map[string]any{"argv": c.argv})
		if r.exit(t) != 0 || !strings.Contains(string(r.stream(t, "stdout")), c.want) {
			t.Errorf("%q: %s, want %q in stdout", c.argv, r.text, c.want)
		}
	}
}

// TestExecNative: with --exec-native a binary a command built (cc) or
// copied runs from the scratch, the cache and a writable root, but not
// from a protected or denied path; without it, none runs. The attestation
// says so, and lists the compiler's helpers.
func TestExecNative(t *testing.T) {
	for _, p := range []string{"/usr/bin/cc", "/usr/include/stdio.h"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("needs a C compiler: %v", err)
		}
	}
	root := t.TempDir()
	copyTree(t, "testdata/recipes/make", root)
	for _, d := range []string{"prot", "den", "sub"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, "/usr/bin/true", filepath.Join(root, "prot/t"), 0o755)
	copyFile(t, "/usr/bin/true", filepath.Join(root, "den/t"), 0o755)
	cc := []string{"--exec", "/bin/sh", "--exec", "/usr/bin/cc", "--exec", "/usr/bin/cp",
		"--exec-read", "/usr/lib/gcc/x86_64-linux-gnu", "--exec-read", "/usr/lib/x86_64-linux-gnu", "--exec-read", "/usr/include",
		"--exec-cache", t.TempDir()}
	scripts := map[string]string{
		"scratch": `cc -o "$TMPDIR/h" hello.c && "$TMPDIR/h"`,
		"cache":   `cc -o "$FSMCP_CACHE/h" hello.c && "$FSMCP_CACHE/h"`,
	}
	for _, native := range []bool{false, true} {
		flags := cc
		if native {
			flags = append(slices.Clone(cc), "--exec-native")
		}
		s := start(t, root, flags...)
		for where, script := range scripts {
			r := s.execCall(sh(script))
			ran := r.exit(t) == 0 && string(r.stream(t, "stdout")) == "hello, make\n"
			if ran != native {
				t.Errorf("native=%v: built in the %s: ran=%v: %s", native, where, ran, r.text)
			}
		}
		ex := s.wantOK("fs_stat", map[string]any{"path": "."}).doc["confinement"].(map[string]any)["exec"].(map[string]any)
		helpers := fmt.Sprint(ex["helpers"])
		if ex["native"] != native || ex["noexec_mounts"] == native || ex["cache"] == "" ||
			!strings.Contains(helpers, "/cc1") || !strings.Contains(helpers, "collect2") ||
			!strings.Contains(fmt.Sprint(ex["env"]), "FSMCP_CACHE=/tmp/cache") {
			t.Errorf("native=%v: attestation %v", native, ex)
		}
	}
	// A writable root: what a command put there runs, a protected or
	// denied program does not.
	s := start(t, root, append(slices.Clone(cc), "--exec-native", "--exec-writable", "--protect", "prot/**", "--deny", "den/**")...)
	for script, want := range map[string]bool{"cp /usr/bin/cp sub/t && sub/t --version": true, "./prot/t": false, "./den/t": false} {
		if r := s.execCall(sh(script)); (r.exit(t) == 0) != want {
			t.Errorf("writable root: %q: %s, want ran=%v", script, r.text, want)
		}
	}
}

// TestExecProgress: during a 12-second command, a call with a progress
// token gets notifications with the elapsed seconds, growing, and the
// output so far; the reply says the command ran past --call-timeout. A
// call without a token gets none.
func TestExecProgress(t *testing.T) {
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, req.Params)
	}}
	s := startWith(t, t.TempDir(), opts, "", append(slices.Clone(execShTest), "--call-timeout", "5s")...)
	params := &mcp.CallToolParams{Name: "fs_exec", Arguments: map[string]any{
		"argv": []string{"sh", "-c", "echo started; sleep 12; echo done"}, "timeout_s": 30}}
	params.SetProgressToken("build-1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.session.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	r := checkReply(t, "fs_exec", res)
	if r.exit(t) != 0 || r.doc["past_call_timeout"] != true {
		t.Errorf("reply %s, want exit 0 and past_call_timeout", r.text)
	}
	mu.Lock()
	notes := slices.Clone(got)
	mu.Unlock()
	if len(notes) < 3 {
		t.Fatalf("%d progress notifications during 12 s, want at least 3 (one every 2 s)", len(notes))
	}
	for i, n := range notes {
		if n.ProgressToken != "build-1" || !strings.Contains(n.Message, "bytes of output") ||
			(i > 0 && n.Progress <= notes[i-1].Progress) || n.Progress > 13 {
			t.Errorf("notification %d: %+v", i, n)
		}
	}
	if last := notes[len(notes)-1]; !strings.Contains(last.Message, " 8 bytes of output") {
		t.Errorf("the last notification %q does not count the 8 bytes written", last.Message)
	}
	r = s.execCall(map[string]any{"argv": []string{"sh", "-c", "sleep 3"}})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(notes) || r.doc["past_call_timeout"] != nil {
		t.Errorf("a call without a progress token: %d notifications, reply %s", len(got)-len(notes), r.text)
	}
}

// TestFsmcpExec: `fsmcp exec` prints what fs_exec returns for the same
// command and flags, and exits with its status; a program not granted
// is refused with 125.
func TestFsmcpExec(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "in"), []byte("from the root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--exec", "/bin/sh", "--exec", "/usr/bin/cat", "--exec-env", "GREETING=hi"}
	script := `cat in; echo "$GREETING $(pwd)"; echo to-stderr >&2; exit 3`
	r := start(t, root, flags...).execCall(map[string]any{"argv": []string{"sh", "-c", script}, "timeout_s": 300})
	cli := func(argv ...string) (string, string, int) {
		cmd := exec.Command(os.Args[0], append(append(append([]string{"exec", "--root", root}, flags...), "--"), argv...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	stdout, stderr, code := cli("sh", "-c", script)
	if stdout != string(r.stream(t, "stdout")) || stderr != string(r.stream(t, "stderr")) || int64(code) != r.exit(t) {
		t.Errorf("fsmcp exec: %q %q exit %d; fs_exec: %s", stdout, stderr, code, r.text)
	}
	if stdout != "from the root\nhi /tmp/root\n" || code != 3 {
		t.Errorf("fsmcp exec: %q exit %d", stdout, code)
	}
	if _, stderr, code := cli("ls"); code != 125 || !strings.Contains(stderr, "permission_denied") {
		t.Errorf("fsmcp exec of a program not granted: exit %d, %q", code, stderr)
	}
}

// nativeRerunEnv makes every fsmcp a test starts with --exec also run
// with --exec-native (TestExecAttacksNative).
const nativeRerunEnv = "FSMCP_TEST_EXEC_NATIVE"

// execAttacks are the tests of what commands must never do. Each must
// still pass with --exec-native on. Left out: TestExecCopiedBinaryRefused
// and TestExecAttestation, which test the noexec rule that --exec-native
// lifts on purpose (TestExecNative tests both sides).
var execAttacks = []string{
	"TestExecArgv0NotGranted", "TestExecReadOutsideRefused", "TestExecWriteRoot", "TestExecNetworkRefused",
	"TestExecTimeoutKillsGrandchild", "TestExecReadDir", "TestExecWorkerDomainUnchanged",
	"TestExecMetadataReadOnlyRoot", "TestExecMetadataWritableRoot", "TestExecMetadataAttested",
	"TestExecSecondNameRefused", "TestExecMetadataUnprivileged", "TestExecPidsForkBombBound",
	"TestExecPolicyDenyInCommands", "TestExecPolicyProtectWritable", "TestExecPolicyDenyInVcs",
	"TestExecProbes", "TestExecDerivedHooksPath", "TestExecSecondNameRulesAndDerived",
}

// TestExecAttacksNative reruns the command attack tests in a test
// process where every server runs commands with --exec-native.
func TestExecAttacksNative(t *testing.T) {
	if os.Getenv(nativeRerunEnv) == "1" {
		t.Skip("already the rerun")
	}
	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v", "-test.run", "^("+strings.Join(execAttacks, "|")+")$")
	cmd.Env = append(os.Environ(), nativeRerunEnv+"=1")
	out, err := cmd.CombinedOutput()
	for _, name := range execAttacks {
		if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) && !bytes.Contains(out, []byte("--- SKIP: "+name+" ")) {
			t.Errorf("%s did not pass with --exec-native", name)
		}
	}
	if err != nil || t.Failed() {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
}

// withNative adds --exec-native to flags that grant a program, in the
// rerun of TestExecAttacksNative.
func withNative(flags []string) []string {
	if os.Getenv(nativeRerunEnv) != "1" {
		return flags
	}
	for _, f := range flags {
		if f == "--exec" || strings.HasPrefix(f, "--exec=") {
			return append(slices.Clone(flags), "--exec-native")
		}
	}
	return flags
}

// TestExecBuildFlagValidation: the build flags need --exec, the cache
// must exist outside the root, and --exec-env takes a name that fsmcp
// does not set itself, from fsmcp's environment when no value is given.
func TestExecBuildFlagValidation(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--exec-native"}, "need --exec"},
		{[]string{"--exec-cache", t.TempDir()}, "need --exec"},
		{[]string{"--exec-env", "A=1"}, "need --exec"},
		{[]string{"--exec", "/bin/sh", "--exec-cache", "cache"}, "not an absolute path"},
		{[]string{"--exec", "/bin/sh", "--exec-cache", "/nonexistent-cache"}, "no such file"},
		{[]string{"--exec", "/bin/sh", "--exec-cache", "/etc/passwd"}, "not a directory"},
		{[]string{"--exec", "/bin/sh", "--exec-cache", root}, "overlaps the root"},
		{[]string{"--exec", "/bin/sh", "--exec-cache", filepath.Dir(root)}, "overlaps the root"},
		{[]string{"--exec", "/bin/sh", "--exec-env", "1A=x"}, "want NAME or NAME=VALUE"},
		{[]string{"--exec", "/bin/sh", "--exec-env", "HOME=/"}, "set by fsmcp"},
		{[]string{"--exec", "/bin/sh", "--exec-env", "FSMCP_CACHE"}, "set by fsmcp"},
		{[]string{"--exec", "/bin/sh", "--exec-env", "FSMCP_TEST_UNSET_VARIABLE"}, "not set in fsmcp's environment"},
	} {
		out, err := fsmcpCommand(root, c.flags...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("flags %q: err %v, output %q, want %q", c.flags, err, out, c.want)
		}
	}
	// NAME alone passes fsmcp's own value.
	sp := spawn(t, root, "--exec", "/bin/sh", "--exec-env", "FSMCP_TEST_PASSED")
	sp.cmd.Env = append(sp.cmd.Env, "FSMCP_TEST_PASSED=from fsmcp")
	r := connectWith(t, sp, nil, "").execCall(sh(`echo "$FSMCP_TEST_PASSED"`))
	if string(r.stream(t, "stdout")) != "from fsmcp\n" {
		t.Errorf("--exec-env NAME: %s", r.text)
	}
}
