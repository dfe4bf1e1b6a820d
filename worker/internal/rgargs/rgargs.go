// Package rgargs builds rg's options from a request. The client's
// pattern, globs and type reach rg only as option values (--regexp=,
// --glob=, --type=), never as arguments of their own, and every list
// starts with the options that keep rg from reading configuration, ignore
// files or archives outside what it searches. The target, and the
// exclusions that protect fsmcp's own files, are the caller's to add last.
package rgargs

import (
	"errors"
	"fmt"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// Common are the options every rg invocation starts with. rg reads no
// configuration file (--no-config, and its environment is empty besides),
// no ignore file above the directory it searches (those are outside the
// search, and may be outside the root) and no global gitignore (that lives
// in a home directory). It never follows symlinks, runs no preprocessor
// and opens no archive: each is also rg's default, stated so that no
// default can change under us.
func Common(hidden, noIgnore bool) []string {
	// --no-ignore-messages: a malformed ignore file is rg's to skip
	// quietly; its warning would otherwise count as an unreadable file.
	args := []string{"--no-config", "--no-ignore-parent", "--no-ignore-global",
		"--no-follow", "--no-pre", "--no-search-zip", "--color=never", "--no-ignore-messages"}
	if noIgnore {
		// No .gitignore, .ignore or .rgignore file is honoured (and
		// every --no-ignore-* above is implied).
		args = append(args, "--no-ignore")
	}
	if hidden {
		args = append(args, "--hidden")
	}
	return args
}

// Excludes adds the client's exclusions, each as a negated glob. They
// come before the search adds fsmcp's own exclusions: in rg the last
// matching glob wins, so none of them can re-include a temp file.
func Excludes(args, excludes []string) []string {
	for _, g := range excludes {
		args = append(args, "--glob=!"+g)
	}
	return args
}

// MaxArgBytes bounds a pattern or glob. The kernel refuses a single exec
// argument over 128 KiB (MAX_ARG_STRLEN); stay well inside it so a long
// argument is a clear refusal rather than an rg that cannot start.
const MaxArgBytes = 64 << 10

// ErrNUL and ErrTooLong are Check's refusals; their text completes
// "pattern …".
var (
	ErrNUL     = errors.New("contains a NUL byte")
	ErrTooLong = fmt.Errorf("is longer than %d bytes", MaxArgBytes)
)

// Check refuses a value that cannot be one exec argument.
func Check(v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return ErrNUL
	}
	if len(v) > MaxArgBytes {
		return ErrTooLong
	}
	return nil
}

// Glob is fs_glob's options: the files rg lists, NUL-terminated, that
// match the pattern, to max_depth, without the exclusions.
func Glob(req *fsmcpv1.GlobRequest) []string {
	opts := append(Common(req.GetHidden(), req.GetNoIgnore()), "--files", "--null", "--glob="+req.GetPattern())
	if n := req.GetMaxDepth(); n > 0 {
		opts = append(opts, fmt.Sprintf("--max-depth=%d", n))
	}
	return Excludes(opts, req.GetExcludes())
}

// Tree is fs_tree's options: fs_glob's listing of every file, with the
// --debug log that names what rg skipped.
func Tree(req *fsmcpv1.TreeRequest) []string {
	args := append(Common(req.GetHidden(), req.GetNoIgnore()), "--files", "--null", "--debug",
		// One level deeper than listed: what rg finds there tells
		// whether a directory at the limit has more to show.
		fmt.Sprintf("--max-depth=%d", req.GetMaxDepth()+1))
	return Excludes(args, req.GetExcludes())
}

// Grep is fs_grep's options: rg --json, or with byFile a count of
// matching lines per file.
func Grep(req *fsmcpv1.GrepRequest, byFile bool) []string {
	args := Common(req.GetHidden(), req.GetNoIgnore())
	if byFile {
		// Per file: its path, NUL, its count of matching lines. The
		// file name is printed even for a single file.
		args = append(args, "--count", "--with-filename", "--null")
	} else {
		args = append(args, "--json")
	}
	if req.GetLiteral() {
		args = append(args, "--fixed-strings")
	}
	if req.GetIgnoreCase() {
		args = append(args, "--ignore-case")
	} else {
		args = append(args, "--case-sensitive")
	}
	if req.GetMultiline() {
		args = append(args, "--multiline")
	}
	if n := req.GetMaxCount(); n > 0 {
		args = append(args, fmt.Sprintf("--max-count=%d", n))
	}
	if n := req.GetContext(); n > 0 {
		args = append(args, fmt.Sprintf("--context=%d", n))
	}
	if n := req.GetBefore(); n > 0 {
		args = append(args, fmt.Sprintf("--before-context=%d", n))
	}
	if n := req.GetAfter(); n > 0 {
		args = append(args, fmt.Sprintf("--after-context=%d", n))
	}
	if ty := req.GetType(); ty != "" {
		// Only a built-in type: --type-add is never passed, so the
		// name cannot define one; an unknown name is rg's
		// "unrecognized file type", an invalid argument.
		args = append(args, "--type="+ty)
	}
	args = append(args, "--regexp="+req.GetPattern())
	for _, g := range req.GetGlobs() {
		args = append(args, "--glob="+g)
	}
	return args
}
