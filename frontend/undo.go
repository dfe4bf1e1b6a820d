package frontend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// --quarantine DIR: the worker moves what fs_delete removes and what the
// writing tools replace into DIR, and their replies carry an undo token for
// fs_undo.

// defaultQuarantineBytes bounds the quarantine unless --quarantine-bytes
// says otherwise.
const defaultQuarantineBytes = 1 << 30

// checkQuarantine resolves --quarantine to the real directory and refuses
// one that could not work: missing, inside the root or holding it (the
// agent could then reach it, or it would swallow the root), on another
// filesystem (a rename cannot cross one), or pointless (--read-only).
func (c *Config) checkQuarantine() error {
	if c.QuarantineBytes < 0 {
		return errors.New("--quarantine-bytes must not be negative")
	}
	if c.Quarantine == "" {
		return nil
	}
	if c.ReadOnly {
		return errors.New("--quarantine has no use with --read-only: nothing is ever removed")
	}
	q, err := realDir("--quarantine", c.Quarantine)
	if err != nil {
		return err
	}
	root, err := realDir("--root", c.Root)
	if err != nil {
		return err
	}
	if within(q, root) || within(root, q) {
		return fmt.Errorf("--quarantine %s: must lie outside --root and not contain it", c.Quarantine)
	}
	var qs, rs syscall.Stat_t
	if err := syscall.Stat(q, &qs); err != nil {
		return fmt.Errorf("--quarantine %s: %w", c.Quarantine, err)
	}
	if err := syscall.Stat(root, &rs); err != nil {
		return fmt.Errorf("--root %s: %w", c.Root, err)
	}
	if qs.Dev != rs.Dev {
		return fmt.Errorf("--quarantine %s: must be on the same filesystem as --root (entries are renamed there, never copied)", c.Quarantine)
	}
	c.Quarantine = q
	return nil
}

// realDir is dir made absolute with every symlink resolved; it must be a
// directory.
func realDir(flag, dir string) (string, error) {
	p, err := filepath.EvalSymlinks(dir)
	if err == nil {
		p, err = filepath.Abs(p)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, dir, errors.Unwrap(err))
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s %s: not a directory", flag, dir)
	}
	return p, nil
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// withUndo adds a reply's undo token, when the worker issued one, and
// notes it for the audit line.
func withUndo(ctx context.Context, doc *obj, token string) *obj {
	if token == "" {
		return doc
	}
	if n, ok := ctx.Value(callNoteKey{}).(*callNote); ok {
		n.undo = token
	}
	return doc.str("undo", token)
}

// maxAuditToken bounds the token an fs_undo line records: a real one is
// 32 characters, anything longer is not one of ours.
const maxAuditToken = 64

func noteUndone(ctx context.Context, token string) {
	if len(token) > maxAuditToken {
		token = string(trimPartialRune([]byte(token[:maxAuditToken])))
	}
	if n, ok := ctx.Value(callNoteKey{}).(*callNote); ok {
		n.undone = token
	}
}
