package worker

import (
	"context"
	"os"
	"path"

	"github.com/fsmcp/fsmcp/worker/internal/fold"
	"golang.org/x/sys/unix"
)

// Case folding: in a directory that compares names without case (ext4's
// or f2fs's casefold flag, or a case-insensitive filesystem), ".GIT/CONFIG"
// is ".git/config" to every program that opens it, git included, so the
// policy matches such paths as the directory does. The exact match comes
// first and costs nothing more; only a path that matches once case-folded
// (sandbox.Fold) and not as it is asks the filesystem, once per directory
// on its way, whether one of them folds.

// folds reports whether a directory on the way to the real
// root-relative path rel (the root, and each ancestor of rel that
// exists) compares names without case.
func (s *Service) folds(rel string) bool {
	for dir := rel; dir != ""; {
		if dir = path.Dir(dir); dir == "." {
			dir = ""
		}
		name := dir
		if name == "" {
			name = "."
		}
		f, err := s.root.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		folding := fold.Dir(int(f.Fd()))
		f.Close()
		if folding {
			return true
		}
	}
	return false
}

// protectedBy returns what makes the real root-relative path rel
// read-only, if anything: "--protect" and a glob, or "derived from" and
// the file of a repository's configuration (derived protection), matched
// as names compare where rel lies.
func (s *Service) protectedBy(rel string) (string, bool) {
	if g, ok := s.policy.Protected(rel); ok {
		return "--protect " + g, true
	}
	if f, ok := s.derivedProtected(rel, false); ok {
		return "derived from " + f, true
	}
	g, globOK := s.policy.ProtectedFolded(rel)
	f, derivedOK := s.derivedProtected(rel, true)
	switch {
	case !globOK && !derivedOK, !s.folds(rel):
		return "", false
	case globOK:
		return "--protect " + g, true
	}
	return "derived from " + f, true
}

// deniedBy returns what hides the content of rel from the call, if
// anything (sandbox.Matcher.Denied of the call's policy), matched as names
// compare where rel lies.
func (s *Service) deniedBy(ctx context.Context, rel string) (string, bool) {
	pol := s.policyOf(ctx)
	if why, ok := pol.Denied(rel); ok {
		return why, true
	}
	if why, ok := pol.DeniedFolded(rel); ok && s.folds(rel) {
		return why, true
	}
	return "", false
}
