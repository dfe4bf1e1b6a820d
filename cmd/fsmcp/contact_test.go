package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend"
)

// rg's advice about its own flags becomes advice about the tool's
// options: the client cannot pass --multiline or --pcre2.
func TestContactRGHintsTranslated(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, c := range []struct{ pattern, want, rgFlag string }{
		{`a\nb`, "fs_grep matches one line at a time", "--multiline"},
		{`(?=a)b`, "without look-around or backreferences", "--pcre2"},
	} {
		r := s.wantErr("fs_grep", map[string]any{"path": "", "pattern": c.pattern}, "invalid_argument")
		msg := r.doc["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, c.want) || strings.Contains(msg, c.rgFlag) {
			t.Errorf("fs_grep %q: message %q, want %q and no %s", c.pattern, msg, c.want, c.rgFlag)
		}
	}
}

// Without --max-response-bytes a reply is at most 65536 bytes: a read of
// a larger file is cut there and says how to continue.
func TestContactDefaultReplyBound(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big.txt"), []byte(strings.Repeat("0123456789abcde\n", 16<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantOK("fs_read", map[string]any{"path": "big.txt"})
	if len(r.text) > 65536 || len(r.text) < 60000 || r.doc["truncated"] != true || r.num("next_offset") != r.num("length") {
		t.Errorf("fs_read of 256 KiB: reply of %d bytes (truncated %v, next_offset %d, length %d), want at most 65536, cut near it",
			len(r.text), r.doc["truncated"], r.num("next_offset"), r.num("length"))
	}
}

// refusedStart runs fsmcp with flags and fails unless it exits 2 with one
// line on stderr that contains want, and nothing on stdout.
func refusedStart(t *testing.T, env []string, want string, flags ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], flags...)
	cmd.Env = append(append(os.Environ(), "FSMCP_TEST_FRONTEND=1", "GORACE=atexit_sleep_ms=0"), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if code := cmd.ProcessState.ExitCode(); code != 2 || len(lines) != 1 || !strings.Contains(lines[0], want) || stdout.Len() > 0 {
		t.Errorf("fsmcp %q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", flags, code, stdout.String(), stderr.String(), want)
	}
}

// Flags that would silently do something else than asked are refused at
// start with the reason.
func TestContactFlagRefusals(t *testing.T) {
	root := t.TempDir()
	fakeRG := func(name, script string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	home := t.TempDir()
	for _, c := range []struct {
		name  string
		env   []string
		want  string
		flags []string
	}{
		{"space in prefix", nil, "tool names may hold only letters, digits", []string{"--root", root, "--tools-prefix", "a b/"}},
		{"slash in prefix", nil, "tool names may hold only", []string{"--root", root, "--tools-prefix", "a/"}},
		{"long prefix", nil, "more than the 128 MCP allows", []string{"--root", root, "--tools-prefix", strings.Repeat("p", 120)}},
		{"rg that is not ripgrep", nil, "does not answer --version as ripgrep", []string{"--root", root, "--rg", "/bin/true"}},
		{"rg too old", nil, "is ripgrep 11.0.2; fsmcp needs 13.0.0 or newer", []string{"--root", root, "--rg", fakeRG("rg", "echo 'ripgrep 11.0.2'")}},
		{"rg failing", nil, "running it with --version failed", []string{"--root", root, "--rg", fakeRG("rg", "exit 3")}},
		{"listen under stdio", nil, "--listen applies to --transport http only", []string{"--root", root, "--listen", "127.0.0.1:9"}},
		{"token file under stdio", nil, "--token-file applies to --transport http only", []string{"--root", root, "--token-file", "/dev/null"}},
		{"origin under stdio", nil, "--allow-origin applies to --transport http only", []string{"--root", root, "--allow-origin", "https://a.example"}},
		{"remote under stdio", nil, "--allow-remote applies to --transport http only", []string{"--root", root, "--transport", "stdio", "--allow-remote"}},
		{"root /", nil, "is the whole filesystem", []string{"--root", "/"}},
		{"root /., read-only", nil, "is the whole filesystem", []string{"--root", "/.", "--read-only"}},
		{"root home", []string{"HOME=" + home}, "is your home directory", []string{"--root", home}},
		{"root home by another name", []string{"HOME=" + home}, "is your home directory", []string{"--root", home + "/../" + filepath.Base(home)}},
	} {
		t.Run(c.name, func(t *testing.T) { refusedStart(t, c.env, c.want, c.flags...) })
	}
}

// --allow-broad-root lets the home directory be served, and a directory
// below it needs nothing: the refusal is for the broad roots only.
func TestContactBroadRootAllowed(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	start(t, home, "--allow-broad-root").wantOK("fs_stat", map[string]any{"path": ""})
	start(t, filepath.Join(home, "project")).wantOK("fs_stat", map[string]any{"path": ""})
}

// fsmcp builds on Linux only and says so: on another system the build's
// only error is the one that names the reason, not an undefined system
// call deep inside.
func TestContactLinuxOnlyBuild(t *testing.T) {
	for _, goos := range []string{"darwin", "windows"} {
		cmd := exec.Command("go", "build", "-o", os.DevNull, "./...")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		var errs []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(l, "#") {
				errs = append(errs, l)
			}
		}
		if err == nil || len(errs) != 1 || !strings.Contains(errs[0], "fsmcp_builds_on_Linux_only") {
			t.Errorf("GOOS=%s go build ./...: %v\n%s\nwant one error naming fsmcp_builds_on_Linux_only", goos, err, out)
		}
	}
}

// Tools that work on a directory take the root when path is left out, as
// "" and "." name it: a client that cannot send an empty string (the MCP
// Inspector's forms) still reaches the root. Tools on one file still
// require a path, and say how to name one.
func TestContactPathLeftOutIsRoot(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, c := range []struct {
		tool string
		args map[string]any
		key  string
	}{
		{"fs_stat", map[string]any{}, "type"},
		{"fs_list", map[string]any{}, "entries"},
		{"fs_glob", map[string]any{"pattern": "**"}, "files"},
		{"fs_grep", map[string]any{"pattern": "."}, "results"},
		{"fs_tree", map[string]any{}, "entries"},
		{"fs_digest", map[string]any{}, "tree_sha256"},
	} {
		left := s.wantOK(c.tool, c.args)
		for _, named := range []string{"", "."} {
			args := map[string]any{"path": named}
			for k, v := range c.args {
				args[k] = v
			}
			if got := s.wantOK(c.tool, args); fmt.Sprint(got.doc[c.key]) != fmt.Sprint(left.doc[c.key]) {
				t.Errorf("%s with path %q: %s = %v; with path left out: %v", c.tool, named, c.key, got.doc[c.key], left.doc[c.key])
			}
		}
		if left.doc[c.key] == nil {
			t.Errorf("%s with path left out: no %s in %s", c.tool, c.key, left.text)
		}
	}
	r := s.wantErr("fs_read", map[string]any{}, "invalid_argument")
	if msg := r.doc["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `"." for the root itself`) {
		t.Errorf("fs_read without path: %q, want it to say how to name a path", msg)
	}
}

// A read without length of bytes that are not text answers 4 KiB of
// base64 and says binary; length still reads as much as asked, and text
// keeps the whole default page.
func TestContactBinaryReadShortDefault(t *testing.T) {
	root := t.TempDir()
	bin := make([]byte, 100<<10)
	for i := range bin {
		bin[i] = byte(i*7 + i>>8)
	}
	if err := os.WriteFile(filepath.Join(root, "blob"), bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "text"), []byte(strings.Repeat("text line\n", 10<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantOK("fs_read", map[string]any{"path": "blob"})
	if r.str("encoding") != "base64" || r.num("length") != 4096 || r.doc["binary"] != true || r.doc["truncated"] != true || r.num("next_offset") != 4096 {
		t.Errorf("fs_read of 100 KiB of binary: %s; want 4096 bytes of base64, binary, truncated, next_offset 4096", r.text[len(r.text)-300:])
	}
	r = s.wantOK("fs_read", map[string]any{"path": "blob", "offset": 4096, "length": 30000})
	if r.num("length") != 30000 || r.doc["binary"] != nil {
		t.Errorf("fs_read of binary with length 30000: length %d, binary %v", r.num("length"), r.doc["binary"])
	}
	r = s.wantOK("fs_read", map[string]any{"path": "text"})
	if r.str("encoding") != "utf8" || r.num("length") < 40000 || r.doc["binary"] != nil {
		t.Errorf("fs_read of text: encoding %s, length %d, binary %v; want the whole default page", r.str("encoding"), r.num("length"), r.doc["binary"])
	}
}

// A start says one thing on stderr: the version, the root, the transport
// and where the audit log goes, once the server answers. --verbose adds
// each process's confinement.
func TestContactQuietStart(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	s.wantOK("fs_stat", map[string]any{"path": "a.txt"})
	s.session.Close()
	s.wait(10 * time.Second)
	var other []string
	for _, l := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		if !strings.HasPrefix(l, "{") { // audit lines are JSON
			other = append(other, l)
		}
	}
	want := "fsmcp " + frontend.Version + ": serving " + root + " on stdio; audit log on stderr"
	if len(other) != 1 || other[0] != want {
		t.Errorf("stderr besides the audit: %q, want exactly %q", other, want)
	}
	v := start(t, root, "--verbose")
	v.wantOK("fs_stat", map[string]any{"path": "a.txt"})
	for _, l := range []string{"fsmcp worker: landlock ABI", "fsmcp worker: seccomp filter:", "fsmcp: front-end confined:", want} {
		if !strings.Contains(v.stderr.String(), l) {
			t.Errorf("--verbose stderr lacks %q:\n%s", l, v.stderr.String())
		}
	}
}
