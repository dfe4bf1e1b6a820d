package worker

import (
	"context"
	"os"
	"path"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// parent is the directory that holds the final component of a path, opened
// through the Root. Every mutation acts on one name relative to its
// descriptor with an *at system call, so the name is resolved exactly once,
// never as a path string, and never through a symlink in its final
// component.
//
// It does not prevent a directory from being moved elsewhere while it is
// open: an outside process that moves it out of the root takes the
// descriptor with it. Landlock, which judges the hierarchy at the time of
// each operation, refuses what would then happen outside the root.
type parent struct {
	f   *os.File
	fd  int
	st  unix.Stat_t
	dir string
	// rel is the directory's real root-relative path ("" for the root),
	// as the kernel names the descriptor (resolve.go).
	rel string
}

func (d *parent) close() { d.f.Close() }

// splitName splits the client path p (as clientPath returned it) into its
// directory and its final component, which must be a plain name: not the
// root, not "." or "..", no trailing slash, and not a temp name of ours.
func splitName(op, p string) (string, string, error) {
	if p == "." {
		return "", "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "%s: the root is not a valid target", op)
	}
	dir, base := path.Split(p)
	switch {
	case base == "":
		return "", "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "%s: the path ends in /", op)
	case base == "." || base == "..":
		return "", "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "%s: the final component must be a name, not %s", op, base)
	case isTempName(base):
		return "", "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "%s: names starting with %s are reserved for fsmcp's temp files", op, tempPrefix)
	}
	if dir == "" {
		dir = "."
	}
	return dir, base, nil
}

// isRoot reports whether st is the root directory.
func (s *Service) isRoot(st *unix.Stat_t) bool { return sameInode(st, toStat(s.rootInfo)) }

// lockKey names one directory entry by its directory's inode, so that
// aliases of a path ("a/../b", a symlinked directory) share one lock.
type lockKey struct {
	dev, ino uint64
	name     string
}

// pathLocks serialises mutations of one directory entry inside the worker.
type pathLocks struct {
	mu sync.Mutex
	m  map[lockKey]*pathLock
}

type pathLock struct {
	ch   chan struct{}
	refs int
}

// lock waits for the entry's lock or for ctx, and returns the unlock.
func (l *pathLocks) lock(ctx context.Context, k lockKey) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[lockKey]*pathLock)
	}
	e := l.m[k]
	if e == nil {
		e = &pathLock{ch: make(chan struct{}, 1)}
		l.m[k] = e
	}
	e.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
