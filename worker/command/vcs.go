package command

import (
	"bytes"
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

// Version control runs the backend's own program under the fs_exec
// confinement with the root read-only and nothing executable but that
// program (and its libraries): whatever a repository's configuration names
// (a hook, core.fsmonitor, a clean, smudge or textconv filter, an external
// diff, a pager, a credential helper, gpg.program, core.sshCommand), the
// kernel refuses to run it. The configuration below neutralises the same
// keys first, so that git does not even try and fail noisily.

// gitConfig is set for every git command through GIT_CONFIG_COUNT, which
// outranks every configuration file and, unlike -c, keeps a key apart
// from its value, so a driver name containing "=" is still addressed.
var gitConfig = [][2]string{
	{"core.fsmonitor", "false"},
	{"core.untrackedCache", "false"},
	{"core.hooksPath", "/dev/null"},
	{"core.pager", "cat"},
	{"core.sshCommand", ""},
	{"core.askPass", ""},
	{"core.editor", ""},
	{"credential.helper", ""},
	{"gpg.program", ""},
	{"diff.external", ""},
	{"protocol.allow", "never"},
	{"submodule.recurse", "false"},
	{"safe.directory", "*"},
}

// gitEnv is git's environment besides baseEnv: no system or global
// configuration, no prompts, no optional locks (the root is read-only),
// literal pathspecs, and no repository discovery above the root.
var gitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_ATTR_NOSYSTEM=1",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_OPTIONAL_LOCKS=0",
	"GIT_LITERAL_PATHSPECS=1",
	"GIT_NO_REPLACE_OBJECTS=1",
	"GIT_PAGER=cat",
	"PAGER=cat",
	"GIT_ASKPASS=",
	"SSH_ASKPASS=",
	"GIT_CEILING_DIRECTORIES=/tmp",
}

// gitFlags come before every git subcommand.
var gitFlags = []string{"--no-pager", "--no-optional-locks", "--literal-pathspecs"}

// configEnv renders config as GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n and
// GIT_CONFIG_VALUE_n.
func configEnv(config [][2]string) []string {
	env := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(len(config))}
	for i, kv := range config {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env
}

// vcsCall is what every version-control call shares.
type vcsCall struct {
	backend  string
	prog     *program
	path     []byte
	files    []string
	timeout  int64
	maxBytes int64
	// lines are the --rules lines of the call's tool, as the call
	// started: every command of the call runs under them.
	lines []sandbox.RuleLine
}

func (s *Service) vcsCall(tool, backend string, path []byte, files [][]byte, timeoutMS, maxBytes int64) (*vcsCall, error) {
	prog := s.vcs[backend]
	if prog == nil {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "backend %q is not enabled (--vcs)", clip(backend))
	}
	c := &vcsCall{backend: backend, prog: prog, path: path, timeout: timeoutMS, maxBytes: maxBytes, lines: s.lines(tool)}
	for _, f := range files {
		name, err := literalFile(f)
		if err != nil {
			return nil, err
		}
		c.files = append(c.files, name)
	}
	return c, nil
}

// literalFile checks one of a call's files: relative, with no ".." and no
// NUL. git resolves it against the working directory, as a literal
// pathspec (never magic, never an option: it follows "--"), inside the
// kernel confinement.
func literalFile(f []byte) (string, error) {
	bad := len(f) == 0 || f[0] == '/' || bytes.IndexByte(f, 0) >= 0
	for _, c := range bytes.Split(f, []byte("/")) {
		if string(c) == ".." {
			bad = true
		}
	}
	if bad {
		return "", &link.Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, Path: string(f),
			Message: "a file must be a relative path without .. or NUL"}
	}
	return string(f), nil
}

// git runs one git subcommand with the hardening, read-only.
func (s *Service) git(ctx context.Context, c *vcsCall, capture int64, args ...string) (*fsmcpv1.CommandResult, error) {
	timeout, _, err := s.bounds(c.timeout, max(c.maxBytes, 1))
	if err != nil {
		return nil, err
	}
	env, err := s.gitHardening(ctx, c, timeout, gitConfig)
	if err != nil {
		return nil, err
	}
	argv := append([]string{"git"}, gitFlags...)
	argv = append(argv, args...)
	argv = append(argv, "--")
	argv = append(argv, c.files...)
	return s.run(ctx, runSpec{prog: c.prog, argv: argv, env: env, cwd: c.path, lines: c.lines,
		files: c.prog.files, readDirs: c.prog.readDirs, timeout: timeout, capture: capture})
}

// gitExecConfig is gitConfig for a git granted to fs_exec, without
// diff.external: git runs an empty one as a program named "" (fs_vcs_diff
// passes --no-ext-diff, a command's own git diff does not). A
// repository's own diff.external is still not executable to the command.
var gitExecConfig = slices.DeleteFunc(slices.Clone(gitConfig), func(kv [2]string) bool { return kv[0] == "diff.external" })

// gitHardening is the environment of every git command fsmcp runs, for
// fs_vcs_* (with gitConfig) and a git granted to fs_exec (gitExecConfig)
// alike: gitEnv, and the configuration with each filter driver the
// repository at c.path defines switched off.
func (s *Service) gitHardening(ctx context.Context, c *vcsCall, timeout time.Duration, base [][2]string) ([]string, error) {
	config := slices.Clone(base)
	drivers, err := s.filterDrivers(ctx, c, timeout)
	if err != nil {
		return nil, err
	}
	for _, d := range drivers {
		for _, k := range []string{"clean", "smudge", "process"} {
			config = append(config, [2]string{"filter." + d + "." + k, ""})
		}
		config = append(config, [2]string{"filter." + d + ".required", "false"})
	}
	return append(append([]string{}, gitEnv...), configEnv(config)...), nil
}

// isGit reports whether the program is git, by the name granted or the
// file it resolves to.
func (p *program) isGit() bool {
	return p.base == "git" || filepath.Base(p.files[0]) == "git"
}

// filterDrivers lists the filter drivers the repository's configuration
// defines (filter.NAME.*), read by git itself in the same confinement, so
// that each can be switched off by name.
func (s *Service) filterDrivers(ctx context.Context, c *vcsCall, timeout time.Duration) ([]string, error) {
	argv := append([]string{"git"}, gitFlags...)
	argv = append(argv, "config", "-z", "--name-only", "--get-regexp", `^filter\.`)
	res, err := s.run(ctx, runSpec{prog: c.prog, argv: argv, env: append(gitEnv, configEnv(gitConfig)...), cwd: c.path, lines: c.lines,
		files: c.prog.files, timeout: timeout, capture: captureBytes})
	if err != nil {
		return nil, err
	}
	switch {
	case res.GetExited() && res.GetExit() == 1:
		return nil, nil // none, or not a repository: the real command says which
	case !res.GetExited() || res.GetExit() != 0 || res.GetStdoutTruncated():
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "git config: %s", clip(string(res.GetStderr())))
	}
	seen := map[string]bool{}
	var drivers []string
	for _, key := range strings.Split(strings.TrimSuffix(string(res.GetStdout()), "\x00"), "\x00") {
		rest, ok := strings.CutPrefix(key, "filter.")
		if i := strings.LastIndexByte(rest, '.'); ok && i > 0 && !seen[rest[:i]] {
			seen[rest[:i]] = true
			drivers = append(drivers, rest[:i])
		}
	}
	return drivers, nil
}

// VcsStatus implements fsmcpv1.ExecServiceServer.
func (s *Service) VcsStatus(ctx context.Context, req *fsmcpv1.VcsStatusRequest) (*fsmcpv1.VcsStatusResponse, error) {
	c, err := s.vcsCall("fs_vcs_status", req.GetBackend(), req.GetPath(), req.GetFiles(), req.GetTimeoutMs(), req.GetMaxBytes())
	if err != nil {
		return nil, err
	}
	switch c.backend {
	case "hg":
		return s.hgStatus(ctx, c)
	case "svn":
		return s.svnStatus(ctx, c)
	}
	res, err := s.git(ctx, c, captureBytes, "status", "--porcelain=v2", "-z", "--branch", "--ignore-submodules=all")
	if err != nil {
		return nil, err
	}
	resp := &fsmcpv1.VcsStatusResponse{Result: res}
	parsePorcelain(resp, res.GetStdout(), res.GetStdoutTruncated())
	res.Stdout = nil
	return resp, nil
}

// VcsDiff implements fsmcpv1.ExecServiceServer.
func (s *Service) VcsDiff(ctx context.Context, req *fsmcpv1.VcsDiffRequest) (*fsmcpv1.VcsDiffResponse, error) {
	c, err := s.vcsCall("fs_vcs_diff", req.GetBackend(), req.GetPath(), req.GetFiles(), req.GetTimeoutMs(), req.GetMaxBytes())
	if err != nil {
		return nil, err
	}
	if c.maxBytes <= 0 || c.maxBytes > MaxBytes {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "max_bytes must be between 1 and %d", MaxBytes)
	}
	if req.GetStaged() && c.backend != "git" {
		return nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "staged is git's: %s has no index", c.backend)
	}
	var res *fsmcpv1.CommandResult
	switch c.backend {
	case "hg":
		res, err = s.hgDiff(ctx, c)
	case "svn":
		res, err = s.svnDiff(ctx, c)
	default:
		res, err = s.gitDiff(ctx, c, req.GetStaged())
	}
	if err != nil {
		return nil, err
	}
	return &fsmcpv1.VcsDiffResponse{Result: res}, nil
}

// gitDiff runs git diff, of the work tree or, staged, of the index.
//
// Under a policy that denies content (--deny, or a --rules deny line of
// fs_vcs_diff), the diff leaves out each file whose real path it denies.
// The command's Landlock rules keep git from the denied work-tree file,
// but not from the repository's objects, where the index and HEAD keep
// earlier versions of the same content: a staged diff, or the diff of a
// denied file deleted from the work tree, would show them. Each file's
// section is judged by its path beneath the repository's top level, which
// git names (rev-parse, in the same confinement); renames are off, so a
// section names one path.
func (s *Service) gitDiff(ctx context.Context, c *vcsCall, staged bool) (*fsmcpv1.CommandResult, error) {
	args := []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all"}
	if staged {
		args = append(args, "--cached")
	}
	pol := s.policy.WithLines(c.lines)
	if !pol.Denies() {
		return s.git(ctx, c, c.maxBytes, args...)
	}
	top, res, err := s.gitTop(ctx, c)
	if err != nil || res != nil {
		return res, err
	}
	// The repository's configuration may not change how a section names
	// its file (diff.noprefix, diff.mnemonicPrefix, diff.relative).
	res, err = s.git(ctx, c, c.maxBytes, append(args, "--no-renames", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/")...)
	if err != nil {
		return nil, err
	}
	var left []string
	res.Stdout, left = filterDiff(res.GetStdout(), func(p string) (string, bool) { return pol.Denied(path.Join(top, p)) })
	leftOut(res, left)
	return res, nil
}

// leftOut says on stderr which files a diff leaves out.
func leftOut(res *fsmcpv1.CommandResult, left []string) {
	for _, l := range left {
		res.Stderr = append(res.Stderr, "fsmcp: the diff of "+strconv.Quote(l)+" is left out: its content is denied\n"...)
	}
}

// An hg or svn diff under a policy that denies content is the diff of
// the paths that the backend lists as changed (hg status, svn diff
// --summarize), less those whose real path the policy denies, each named
// explicitly: hg and svn read a file's stored version from .hg and .svn,
// which the command's Landlock rules do not cover, and print names
// unquoted (a name holding a newline could forge a section), so their
// output is not filtered afterwards.

// changed is one path an hg or svn diff would show, named relative to
// the call's directory; left when the policy denies its content (or, for
// hg, that of the copy source its diff would show).
type changed struct {
	name string
	left bool
}

// diffNamed runs diff on the paths of list that are not left out, named
// as the call's files, and says on stderr which are left out. With no
// path left to name, the diff is empty: it never falls back to the whole
// working copy.
func diffNamed(c *vcsCall, list []changed, diff func(*vcsCall) (*fsmcpv1.CommandResult, error)) (*fsmcpv1.CommandResult, error) {
	named := *c
	named.files = nil
	var left []string
	for _, f := range list {
		if f.left {
			left = append(left, f.name)
		} else {
			named.files = append(named.files, f.name)
		}
	}
	res := &fsmcpv1.CommandResult{Exited: true}
	if len(named.files) > 0 {
		var err error
		if res, err = diff(&named); err != nil {
			return nil, err
		}
	}
	leftOut(res, left)
	return res, nil
}

// statusCut is the error of a status too long to list a filtered diff's
// files.
func statusCut(backend string) error {
	return errorf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE,
		"%s status lists more than %d bytes of changed files: name fewer files to diff under the deny policy", backend, captureBytes)
}

// realDir is the root-relative path of the directory p names, as the
// kernel names it (/proc/self/fd): symlinks on the way are resolved, as
// they are for the command run in it.
func (s *Service) realDir(p []byte) (string, error) {
	dir, err := link.OpenDir(s.root, p)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	root, err := s.root.OpenFile(".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "open the root: %v", err)
	}
	defer root.Close()
	d, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())))
	if err != nil {
		return "", errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "name the directory: %v", err)
	}
	r, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(root.Fd())))
	if err != nil {
		return "", errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "name the root: %v", err)
	}
	if d == r {
		return "", nil
	}
	rel, ok := strings.CutPrefix(d, strings.TrimSuffix(r, "/")+"/")
	if !ok {
		return "", errorf(fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT, "the directory lies outside the root")
	}
	return rel, nil
}

// gitTop is the root-relative path of the repository's top level ("" for
// the root). When git cannot name it (not a repository), res is git's
// answer, returned as the diff's.
func (s *Service) gitTop(ctx context.Context, c *vcsCall) (string, *fsmcpv1.CommandResult, error) {
	timeout, _, err := s.bounds(c.timeout, 1)
	if err != nil {
		return "", nil, err
	}
	argv := append([]string{"git"}, gitFlags...)
	argv = append(argv, "rev-parse", "--show-toplevel")
	res, err := s.run(ctx, runSpec{prog: c.prog, argv: argv, env: append(gitEnv, configEnv(gitConfig)...), cwd: c.path,
		lines: c.lines, files: c.prog.files, timeout: timeout, capture: captureBytes})
	switch {
	case err != nil:
		return "", nil, err
	case !res.GetExited() || res.GetExit() != 0:
		return "", res, nil
	}
	top := strings.TrimSuffix(string(res.GetStdout()), "\n")
	if top == sandbox.ExecRoot {
		return "", nil, nil
	}
	rel, ok := strings.CutPrefix(top, sandbox.ExecRoot+"/")
	if !ok {
		return "", nil, errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "git names the repository's top level outside the root")
	}
	return rel, nil, nil
}

// filterDiff drops from a git diff (without renames) each file's section
// whose path denied reports, and returns those paths. A path git cannot
// name plainly is C-quoted ("a/\303\251"); one whose header does not
// parse is left out too.
func filterDiff(out []byte, denied func(p string) (string, bool)) ([]byte, []string) {
	var kept []byte
	var left []string
	drop := false
	for len(out) > 0 {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line = out[:i+1]
		}
		out = out[len(line):]
		if h, ok := bytes.CutPrefix(line, []byte("diff --git ")); ok {
			p, parsed := diffPath(string(bytes.TrimSuffix(h, []byte("\n"))))
			_, deny := denied(p)
			drop = !parsed || deny
			if drop {
				left = append(left, p)
			}
		}
		if !drop {
			kept = append(kept, line...)
		}
	}
	return kept, left
}

// diffPath parses "a/P b/P" (or both C-quoted) into P.
func diffPath(h string) (string, bool) {
	if strings.HasPrefix(h, `"`) {
		end := 1
		for end < len(h) && h[end] != '"' {
			if h[end] == '\\' {
				end++
			}
			end++
		}
		a, err := strconv.Unquote(h[:min(end+1, len(h))])
		if err != nil || !strings.HasPrefix(a, "a/") {
			return h, false
		}
		b, err := strconv.Unquote(strings.TrimPrefix(h[min(end+1, len(h)):], " "))
		return a[2:], err == nil && b == "b/"+a[2:]
	}
	n := (len(h) - 5) / 2
	if len(h) < 5 || len(h)%2 == 0 || !strings.HasPrefix(h, "a/") || h[2:2+n] != h[2+n+3:] || h[2+n:2+n+3] != " b/" {
		return h, false
	}
	return h[2 : 2+n], true
}

// nulRecords splits NUL-terminated records. When the output was cut, the
// last record may be partial and is dropped.
func nulRecords(out []byte, cut bool) [][]byte {
	recs := bytes.Split(out, []byte{0})
	if len(recs) > 0 && len(recs[len(recs)-1]) == 0 {
		recs = recs[:len(recs)-1]
	} else if cut && len(recs) > 0 {
		recs = recs[:len(recs)-1]
	}
	return recs
}

// parsePorcelain reads git status --porcelain=v2 -z --branch into resp.
// When the output was cut, the last record may be partial: it is dropped
// and entries_truncated set.
func parsePorcelain(resp *fsmcpv1.VcsStatusResponse, out []byte, cut bool) {
	recs := nulRecords(out, cut)
	resp.EntriesTruncated = cut
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		if len(r) < 2 {
			continue
		}
		switch r[0] {
		case '#':
			header(resp, string(r[2:]))
		case '1':
			if f := bytes.SplitN(r, []byte(" "), 9); len(f) == 9 {
				resp.Entries = append(resp.Entries, &fsmcpv1.VcsEntry{Kind: "changed", Xy: string(f[1]), Submodule: string(f[2]), Path: f[8]})
			}
		case '2':
			f := bytes.SplitN(r, []byte(" "), 10)
			if len(f) != 10 || i+1 >= len(recs) {
				resp.EntriesTruncated = true
				continue
			}
			kind := "renamed"
			if len(f[8]) > 0 && f[8][0] == 'C' {
				kind = "copied"
			}
			i++
			resp.Entries = append(resp.Entries, &fsmcpv1.VcsEntry{Kind: kind, Xy: string(f[1]), Submodule: string(f[2]),
				Score: string(f[8]), Path: f[9], OrigPath: recs[i]})
		case 'u':
			if f := bytes.SplitN(r, []byte(" "), 11); len(f) == 11 {
				resp.Entries = append(resp.Entries, &fsmcpv1.VcsEntry{Kind: "unmerged", Xy: string(f[1]), Submodule: string(f[2]), Path: f[10]})
			}
		case '?':
			resp.Entries = append(resp.Entries, &fsmcpv1.VcsEntry{Kind: "untracked", Path: r[2:]})
		case '!':
			resp.Entries = append(resp.Entries, &fsmcpv1.VcsEntry{Kind: "ignored", Path: r[2:]})
		}
	}
}

// header reads one "# branch.*" line.
func header(resp *fsmcpv1.VcsStatusResponse, h string) {
	key, val, _ := strings.Cut(h, " ")
	switch key {
	case "branch.oid":
		resp.BranchOid = val
	case "branch.head":
		resp.BranchHead = val
	case "branch.upstream":
		resp.BranchUpstream = val
	case "branch.ab":
		a, b, ok := strings.Cut(val, " ")
		ahead, err1 := strconv.ParseInt(strings.TrimPrefix(a, "+"), 10, 64)
		behind, err2 := strconv.ParseInt(strings.TrimPrefix(b, "-"), 10, 64)
		if ok && err1 == nil && err2 == nil {
			resp.Ahead, resp.Behind, resp.HasAheadBehind = ahead, behind, true
		}
	}
}
