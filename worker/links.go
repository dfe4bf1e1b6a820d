package worker

import (
	"strconv"
	"sync"
	"sync/atomic"

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

// linkRule is why an inode is remembered: its path, and the rules that
// protect and deny it ("" for none); protectFlag says whose the protect
// rule is ("--protect", or "derived from" for derived protection).
type linkRule struct {
	rel, protectFlag, protect, deny string
}

// maxLinks bounds what links remembers; once full, it remembers no more.
const maxLinks = 1 << 16

// note remembers st if it is a regular file with other names whose path
// rel the policy (its globs, or derived protection as last derived)
// protects or denies.
func (s *Service) note(rel string, st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink < 2 {
		return
	}
	r := linkRule{rel: rel}
	if g, ok := s.policy.Protected(rel); ok {
		r.protectFlag, r.protect = "--protect", g
	} else if f, ok := s.derivedProtected(rel, false); ok {
		r.protectFlag, r.protect = "derived from", f
	}
	r.deny, _ = s.policy.Denied(rel)
	if r.protect == "" && r.deny == "" {
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
	s.links.m[k] = r
	if r.deny != "" {
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
// another name of a remembered protected or denied file.
func (s *Service) judgeLink(op, p, rel string, st *unix.Stat_t, kind access) error {
	r, ok := s.linked(st)
	if !ok || r.rel == rel {
		return nil
	}
	mutate := kind == accessMutate || kind == accessRewrite
	content := kind == accessContent || kind == accessRewrite
	switch {
	case r.protect != "" && mutate:
		return policyError(op, p, rel, "is a hard link of "+strconv.Quote(r.rel)+", which is protected", r.protectFlag, r.protect)
	case r.deny != "" && content:
		return policyError(op, p, rel, "is a hard link of "+strconv.Quote(r.rel)+", which is denied", "--deny", r.deny)
	}
	return nil
}

// linkDenied reports whether name in the directory dirfd is another name
// of a remembered denied file (for filtering search results).
func (s *Service) linkDenied(dirfd int, name string) bool {
	if s.links.denied.Load() == 0 {
		return false
	}
	st, err := fstatat(dirfd, name)
	if err != nil {
		return true // cannot tell: leave it out
	}
	r, ok := s.linked(st)
	return ok && r.deny != ""
}
