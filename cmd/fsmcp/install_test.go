package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goEnv keeps the build cache and module cache of the test's own go while
// HOME points elsewhere, so the install builds offline and quickly.
func goEnv(t *testing.T, home string) []string {
	t.Helper()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "GOTOOLCHAIN=local", "GOPROXY=off"}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	return env
}

// TestInstallScript runs scripts/install.sh into a temporary prefix and
// checks what it promises: a -trimpath static binary at PREFIX/bin/fsmcp
// that serves a directory, the ripgrep and Landlock reports, and client
// configurations that parse and name the installed binary.
func TestInstallScript(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	home := t.TempDir()
	prefix := filepath.Join(t.TempDir(), "pfx")
	root := filepath.Join(t.TempDir(), `dir with "quotes" and spaces`)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "../../scripts/install.sh", "--prefix", prefix, "--root", root)
	cmd.Env = goEnv(t, home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	text := string(out)
	bin := filepath.Join(prefix, "bin", "fsmcp")
	fi, err := os.Stat(bin)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v %v\n%s", fi, err, text)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("install.sh wrote into HOME despite --prefix: %v", ents)
	}

	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-trimpath=true", "CGO_ENABLED=0"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("binary built without %s:\n%s", want, info)
		}
	}
	if strings.Contains(string(info), "/work/") || strings.Contains(string(info), home) {
		t.Errorf("build paths recorded in the binary:\n%s", info)
	}

	rg, _ := exec.LookPath("rg")
	if !strings.Contains(text, "ripgrep: "+rg+" (ripgrep ") {
		t.Errorf("no ripgrep report naming %s:\n%s", rg, text)
	}
	if want := "Landlock ABI " + strconv.Itoa(sandbox.KernelABI()) + ":"; !strings.Contains(text, want) {
		t.Errorf("no %q report:\n%s", want, text)
	}

	// Both JSON configurations parse and launch the installed binary on
	// the given root.
	type entry struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	for _, c := range []struct{ heading, key string }{
		{"== Claude Code", "mcpServers"},
		{"== VS Code", "servers"},
	} {
		i := strings.Index(text, c.heading)
		if i < 0 {
			t.Errorf("no %s section:\n%s", c.heading, text)
			continue
		}
		rest := text[i:]
		var doc map[string]map[string]entry
		if err := json.NewDecoder(strings.NewReader(rest[strings.Index(rest, "{"):])).Decode(&doc); err != nil {
			t.Errorf("%s: %v", c.heading, err)
			continue
		}
		e := doc[c.key]["fsmcp"]
		if e.Command != bin || len(e.Args) != 2 || e.Args[0] != "--root" || e.Args[1] != root {
			t.Errorf("%s: %+v, want %s --root %s", c.heading, e, bin, root)
		}
		if c.key == "servers" && e.Type != "stdio" {
			t.Errorf("VS Code entry type %q", e.Type)
		}
	}
	if !regexp.MustCompile(`claude mcp add fsmcp -- \S+ --root \S+`).MatchString(text) {
		t.Errorf("no claude mcp add line:\n%s", text)
	}

	// The installed binary is a working fsmcp.
	client := mcp.NewClient(&mcp.Implementation{Name: "install-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := exec.Command(bin, "--root", root)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: run, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to the installed binary: %v", err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"content":"hello\n"`) {
		t.Errorf("fs_read through the installed binary: %v %+v", err, res)
	}
}

// TestInstallScriptArguments: bad arguments are refused before anything
// is built.
func TestInstallScriptArguments(t *testing.T) {
	for _, args := range [][]string{{"--prefix"}, {"--bogus"}, {"--root"}} {
		cmd := exec.Command("bash", append([]string{"../../scripts/install.sh"}, args...)...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("install.sh %v: exit %d, want 2\n%s", args, code, out)
		}
	}
	cmd := exec.Command("bash", "../../scripts/install.sh", "--help")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "usage: scripts/install.sh") {
		t.Errorf("--help: %v\n%s", err, out)
	}
}

// unitValues returns every value of key in a unit file.
func unitValues(text, key string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// TestSystemdUnits checks the shipped units: systemd-analyze verify
// accepts them (when systemd is installed), the hardening they promise is
// there, and fsmcp accepts the flags each ExecStart passes.
func TestSystemdUnits(t *testing.T) {
	dir := "../../scripts/systemd"
	units := []string{"fsmcp.socket", "fsmcp.service", "fsmcp-stdio.socket", "fsmcp-stdio@.service"}
	tmp := t.TempDir()
	text := map[string]string{}
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join(dir, u))
		if err != nil {
			t.Fatal(err)
		}
		text[u] = string(b)
		// verify wants the ExecStart binary to exist.
		b = []byte(strings.ReplaceAll(string(b), "/usr/local/bin/fsmcp", os.Args[0]))
		if err := os.WriteFile(filepath.Join(tmp, u), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, svc := range []string{"fsmcp.service", "fsmcp-stdio@.service"} {
		s := text[svc]
		for _, want := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=/srv/fsmcp",
			"PrivateNetwork=yes", "RestrictAddressFamilies=AF_UNIX", "CapabilityBoundingSet=", "User=fsmcp"} {
			if !slices.Contains(strings.Split(s, "\n"), want) {
				t.Errorf("%s lacks %s", svc, want)
			}
		}
		filter := unitValues(s, "SystemCallFilter")
		if len(filter) != 1 || !strings.HasPrefix(filter[0], "@system-service ") || !strings.Contains(filter[0], "landlock_restrict_self") {
			t.Errorf("%s SystemCallFilter = %q", svc, filter)
		}
		execStart := unitValues(s, "ExecStart")
		if len(execStart) != 1 {
			t.Fatalf("%s ExecStart = %q", svc, execStart)
		}
		args := strings.Fields(strings.ReplaceAll(execStart[0], "%d", tmp))[1:]
		cmd := versionCommand(args)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: fsmcp refuses its ExecStart flags %q: %v\n%s", svc, args, err, out)
		}
	}
	if v := unitValues(text["fsmcp.service"], "Restart"); len(v) != 1 || v[0] != "on-failure" {
		t.Errorf("fsmcp.service Restart = %q", v)
	}
	if v := unitValues(text["fsmcp-stdio.socket"], "Accept"); len(v) != 1 || v[0] != "yes" {
		t.Errorf("fsmcp-stdio.socket Accept = %q", v)
	}
	if v := unitValues(text["fsmcp-stdio@.service"], "StandardInput"); len(v) != 1 || v[0] != "socket" {
		t.Errorf("fsmcp-stdio@.service StandardInput = %q", v)
	}
	if v := unitValues(text["fsmcp.socket"], "ListenStream"); len(v) != 1 || !strings.HasPrefix(v[0], "127.0.0.1:") {
		t.Errorf("fsmcp.socket ListenStream = %q, want loopback", v)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: units not verified by systemd")
		return
	}
	args := []string{"verify", "--man=no"}
	for _, u := range units {
		args = append(args, filepath.Join(tmp, u))
	}
	out, err := exec.Command(analyze, args...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// versionCommand runs the test binary as the fsmcp front-end with args and
// --version: flag parsing runs, nothing starts.
func versionCommand(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append(args, "--version")...)
	cmd.Env = append(os.Environ(), "FSMCP_TEST_FRONTEND=1")
	return cmd
}
