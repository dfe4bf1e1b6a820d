package worker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// links remembers the inodes of protected and denied regular files that
// have more than one name, as the worker meets them (the start-up walk of
// the tree, listings, stats, refusals), so that another name of such a
// file is judged like the one the policy matched. A file whose other name
// the worker has not met is judged by the name the call used.
//
// fs_write and fs_replace replace the name they are given, never the
// shared inode, so another name of a protected file never changes its
// content; the check is for tools that write in place, and for reading
// denied content through an allowed name.
type links struct {
	mu sync.Mutex
	m  map[[2]uint64]linkRule
	// denied counts the remembered inodes that are denied.
	denied atomic.Int64
}

// linkRule is a remembered inode: the path it was met under, which the
// policy protects (by a glob or derived protection) or denies (or, under
// --rules, a deny line of some tool matches), and whether it was
// remembered for denial.
type linkRule struct {
	rel    string
	denied bool
}

// maxLinks bounds what links remembers; once full, it remembers no more.
const maxLinks = 1 << 16

// note remembers st if it is a regular file with other names whose path
// rel the policy protects (by a glob, or derived protection as last
// derived) or denies, or a --rules deny line of any tool matches: each
// call judges the remembered path by its own policy.
func (s *Service) note(rel string, st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink < 2 {
		return
	}
	_, protected := s.policy.Protected(rel)
	if !protected {
		_, protected = s.derivedProtected(rel, false)
	}
	_, denied := s.policy.Denied(rel)
	denied = denied || s.rules != nil && s.rules.AnyDeny(rel)
	if !protected && !denied {
		return
	}
	k := [2]uint64{st.Dev, st.Ino}
	s.links.mu.Lock()
	defer s.links.mu.Unlock()
	if s.links.m == nil {
		s.links.m = map[[2]uint64]linkRule{}
	}
	if _, known := s.links.m[k]; known || len(s.links.m) >= maxLinks {
		return
	}
	s.links.m[k] = linkRule{rel: rel, denied: denied}
	if denied {
		s.links.denied.Add(1)
	}
}

// linked returns the rule of a remembered inode that st is another name
// of, if any.
func (s *Service) linked(st *unix.Stat_t) (linkRule, bool) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink < 2 {
		return linkRule{}, false
	}
	s.links.mu.Lock()
	defer s.links.mu.Unlock()
	r, ok := s.links.m[[2]uint64{st.Dev, st.Ino}]
	return r, ok
}

// judgeLink refuses the name rel (whose lstat is st) for kind when it is
// another name of a remembered file that is protected, or denied by the
// call's policy.
func (s *Service) judgeLink(ctx context.Context, op, p, rel string, st *unix.Stat_t, kind access) error {
	r, ok := s.linked(st)
	if !ok || r.rel == rel {
		return nil
	}
	if kind == accessMutate || kind == accessRewrite {
		if why, ok := s.protectedBy(r.rel); ok {
			return policyError(op, p, rel, "is a hard link of "+strconv.Quote(r.rel)+", which is protected", why)
		}
	}
	if kind == accessContent || kind == accessRewrite {
		if why, ok := s.policyOf(ctx).Denied(r.rel); ok {
			return policyError(op, p, rel, "is a hard link of "+strconv.Quote(r.rel)+", which is denied", why)
		}
	}
	return nil
}

// linkDenied reports whether name in the directory dirfd is another name
// of a remembered file that pol denies (for filtering search results).
func (s *Service) linkDenied(pol *sandbox.Matcher, dirfd int, name string) bool {
	if s.links.denied.Load() == 0 {
		return false
	}
	st, err := fileio.Lstatat(dirfd, name)
	if err != nil {
		return true // cannot tell: leave it out
	}
	r, ok := s.linked(st)
	if !ok || !r.denied {
		return false
	}
	_, denied := pol.Denied(r.rel)
	return denied
}
