package frontend

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// defaultStateDir is where --state-dir defaults to: systemd's
// $STATE_DIRECTORY (its first entry), else $XDG_STATE_HOME/fsmcp, else
// ~/.local/state/fsmcp.
func defaultStateDir(getenv func(string) string) (string, error) {
	if d, _, _ := strings.Cut(getenv("STATE_DIRECTORY"), ":"); d != "" {
		return d, nil
	}
	// The XDG specification ignores a relative path.
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "fsmcp"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("no state directory: pass --state-dir, or set $XDG_STATE_HOME or $HOME")
	}
	return filepath.Join(home, ".local", "state", "fsmcp"), nil
}

// checkStateDir resolves the state directory, made 0700 if missing, and
// in it the root's own subdirectory, root-DEV-INO by the root's device
// and inode, which the worker is granted and keeps fs_patch's journals
// in. Neither may lie inside the root, nor the root inside the
// subdirectory: the agent could then write a journal. The subdirectory
// must be this user's and writable by no one else, for the same reason.
func (c *Config) checkStateDir() error {
	flag := "--state-dir"
	dir := c.StateDir
	if dir == "" {
		d, err := defaultStateDir(os.Getenv)
		if err != nil {
			return err
		}
		dir, flag = d, "the state directory"
	}
	root, err := realDir("--root", c.Root)
	if err != nil {
		return err
	}
	inRoot := fmt.Errorf("%s %s: must lie outside --root (the agent could write the journals recovery reads)", flag, dir)
	// Checked before it is made, so that a refused one is not made in
	// the root, and again once it exists.
	if p, err := realPathOf(dir); err != nil || within(p, root) {
		return inRoot
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s %s: %w", flag, dir, errors.Unwrap(err))
	}
	real, err := realDir(flag, dir)
	if err != nil {
		return err
	}
	if within(real, root) {
		return inRoot
	}
	var rs syscall.Stat_t
	if err := syscall.Stat(root, &rs); err != nil {
		return fmt.Errorf("--root %s: %w", c.Root, err)
	}
	sub := filepath.Join(real, fmt.Sprintf("root-%d-%d", rs.Dev, rs.Ino))
	if err := os.Mkdir(sub, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s %s: %w", flag, dir, errors.Unwrap(err))
	}
	var ss syscall.Stat_t
	if err := syscall.Lstat(sub, &ss); err != nil {
		return fmt.Errorf("%s %s: %w", flag, sub, err)
	}
	switch {
	case ss.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		return fmt.Errorf("%s: %s is not a directory", flag, sub)
	case ss.Uid != uint32(os.Geteuid()) || ss.Mode&0o022 != 0:
		return fmt.Errorf("%s: %s must belong to this user and be writable by no one else", flag, sub)
	case within(root, sub):
		return fmt.Errorf("%s %s: must not hold --root", flag, dir)
	}
	c.stateSub = sub
	return nil
}

// realPathOf is p made absolute, with the symlinks of its longest
// existing ancestor resolved.
func realPathOf(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest, p = filepath.Join(filepath.Base(p), rest), parent
	}
}

// journalPlace attests where fs_patch's journals are, without the host
// path.
func journalPlace(outside bool) string {
	if outside {
		return "state directory outside the root"
	}
	return "none: fs_patch is unavailable"
}

// auditSetAside records each journal the worker's recovery set aside.
func auditSetAside(a *auditLog, stateSub string, set []*fsmcpv1.SetAsideJournal) {
	for _, j := range set {
		o := newObj().str("time", formatTime(time.Now().UnixNano())).str("event", "journal_set_aside").
			str("state_dir", stateSub).str("journal", j.GetName()).str("reason", j.GetReason())
		a.record(append(o.bytes(), '\n'))
	}
}
