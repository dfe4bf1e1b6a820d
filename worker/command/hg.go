package command

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// Mercurial is a Python program. What the kernel stops for git (a
// repository's program never starts: nothing but the backend's own files
// is executable) does not cover code Python reads and runs in-process: an
// extension or a python: hook named by .hg/hgrc is a file read, not
// executed. So for hg the configuration is the layer that matters, and it
// is cut off at its source:
//   - HGRCSKIPREPO=1: the repository's .hg/hgrc (and what it includes) is
//     never read: no extension, hook, alias, pager, merge tool or
//     [defaults] from the repository;
//   - HGRCPATH=/dev/null: no system or user configuration either (the
//     operator's own extensions are not loaded in the confinement);
//   - HGPLAIN=1: aliases, defaults, i18n and other output-changing
//     settings are off, so the output is the machine format;
//   - --pager never, --color never, --noninteractive and --config
//     overrides for what a configuration could otherwise name.
//
// The kernel still refuses every program hg would start (a shell hook,
// a pager, a merge tool): only the interpreter and its libraries are
// executable, and the Python library directories are granted read only.

// hgEnv is hg's environment besides baseEnv.
var hgEnv = []string{
	"HGRCPATH=/dev/null",
	"HGRCSKIPREPO=1",
	"HGPLAIN=1",
	"HGUSER=fsmcp",
	"HGEDITOR=false",
	"HGMERGE=internal:fail",
	"PAGER=cat",
}

// hgFlags come before every hg subcommand.
var hgFlags = []string{
	"--pager", "never", "--color", "never", "--noninteractive",
	"--config", "ui.interactive=false",
	"--config", "ui.paginate=false",
	"--config", "ui.merge=internal:fail",
	"--config", "ui.ssh=false",
	"--config", "extensions.fsmonitor=!",
}

// newHg is hg, the Python script at path, run by its interpreter (the
// "#!" line, which must name an ELF executable) in isolated mode (-I: no
// PYTHON* variables, no user site directory, not the script's directory
// on sys.path) and without writing bytecode (-B). The interpreter's
// sys.path directories that exist are granted read.
func newHg(path string) (*program, error) {
	interp, err := shebang(path)
	if err != nil {
		return nil, err
	}
	prog, err := newProgram(interp)
	if err != nil {
		return nil, fmt.Errorf("%s's interpreter: %w", path, err)
	}
	prog.base = "hg"
	prog.args = []string{"-I", "-B", path}
	// The script is read, and granted as the programs' files are.
	prog.files = append(prog.files, path)
	cmd := exec.Command(interp, "-I", "-c",
		"import os, sys, mercurial; print('\\0'.join(p for p in sys.path if os.path.isdir(p)))")
	cmd.Dir, cmd.Env = "/", []string{}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s cannot import mercurial: %w", interp, err)
	}
	for _, d := range strings.Split(strings.TrimSpace(string(out)), "\x00") {
		if real, err := filepath.EvalSymlinks(d); err == nil && filepath.IsAbs(real) {
			prog.readDirs = append(prog.readDirs, real)
		}
	}
	if len(prog.readDirs) == 0 {
		return nil, fmt.Errorf("%s reports no library directory", interp)
	}
	prog.version, err = version(append([]string{interp}, append(prog.args, "--version")...), hgEnv)
	return prog, err
}

// shebang is the absolute interpreter a script's "#!" line names, symlinks
// resolved. An interpreter argument is refused: hg's own line has none.
func shebang(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("%s: no #! line: %w", path, err)
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
	fields := strings.Fields(rest)
	if !ok || len(fields) != 1 || !filepath.IsAbs(fields[0]) {
		return "", fmt.Errorf("%s: want a #! line naming one absolute interpreter, got %q", path, line)
	}
	return filepath.EvalSymlinks(fields[0])
}

// hg runs one hg subcommand with the hardening, read-only. Each file is a
// relpath: pattern, a literal name relative to the working directory
// (never a glob, regexp, fileset or listfile).
func (s *Service) hg(ctx context.Context, c *vcsCall, capture int64, args ...string) (*fsmcpv1.CommandResult, error) {
	timeout, _, err := s.bounds(c.timeout, max(c.maxBytes, 1))
	if err != nil {
		return nil, err
	}
	argv := append(append([]string{"python3"}, c.prog.args...), hgFlags...)
	argv = append(append(argv, args...), "--")
	for _, f := range c.files {
		argv = append(argv, "relpath:"+f)
	}
	return s.run(ctx, runSpec{prog: c.prog, argv: argv, env: hgEnv, cwd: c.path, lines: c.lines,
		files: c.prog.files, readDirs: c.prog.readDirs, timeout: timeout, capture: capture})
}

// hgStatus runs hg status --copies --print0 and parses it. hg's letters
// are kept as xy: M (modified), A (added), R (removed), ! (missing) are
// "changed"; ? "untracked"; I "ignored". An added file with a copy
// source is "copied", or "renamed" when the source is removed.
func (s *Service) hgStatus(ctx context.Context, c *vcsCall) (*fsmcpv1.VcsStatusResponse, error) {
	res, err := s.hg(ctx, c, captureBytes, "status", "--copies", "--print0")
	if err != nil {
		return nil, err
	}
	resp := &fsmcpv1.VcsStatusResponse{Result: res}
	parseHgStatus(resp, res.GetStdout(), res.GetStdoutTruncated())
	res.Stdout = nil
	return resp, nil
}

// parseHgStatus reads "L path\0" records, each copy source following its
// file as "  source\0". A cut output loses its last record.
func parseHgStatus(resp *fsmcpv1.VcsStatusResponse, out []byte, cut bool) {
	recs := nulRecords(out, cut)
	resp.EntriesTruncated = cut
	removed := map[string]bool{}
	for _, r := range recs {
		if len(r) > 2 && r[0] == 'R' && r[1] == ' ' {
			removed[string(r[2:])] = true
		}
	}
	renamedFrom := map[string]bool{}
	for _, r := range recs {
		if len(r) < 3 || r[1] != ' ' {
			continue
		}
		if r[0] == ' ' {
			// The copy source of the entry before.
			if n := len(resp.Entries); n > 0 && resp.Entries[n-1].GetXy() == "A" {
				e := resp.Entries[n-1]
				e.OrigPath = bytes.Clone(r[2:])
				e.Kind = "copied"
				if removed[string(r[2:])] {
					e.Kind = "renamed"
					renamedFrom[string(r[2:])] = true
				}
			}
			continue
		}
		kind := "changed"
		switch r[0] {
		case '?':
			kind = "untracked"
		case 'I':
			kind = "ignored"
		case 'C':
			continue // clean: only with --all
		}
		resp.Entries = append(resp.Entries, &fsmcpv1.VcsEntry{Kind: kind, Xy: string(r[0]), Path: bytes.Clone(r[2:])})
	}
	// A rename is one entry, as git reports it: its source's removal is
	// part of it.
	kept := resp.Entries[:0]
	for _, e := range resp.Entries {
		if !(e.GetXy() == "R" && renamedFrom[string(e.GetPath())]) {
			kept = append(kept, e)
		}
	}
	resp.Entries = kept
}
