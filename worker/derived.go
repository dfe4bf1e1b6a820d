package worker

import (
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/derive"
	"github.com/fsmcp/fsmcp/worker/internal/dirwalk"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
)

// derivation is the Service's derived protection (package derive): the
// repositories found in the root, brought up to date before each
// mutation is judged.
type derivation struct {
	mu    sync.Mutex
	walk  sync.Once
	repos map[string]*derive.Repo // by the root-relative path of the ".git" entry
	// entries is every repository's entries, replaced whole.
	entries atomic.Pointer[[]derive.Entry]
}

// derivedProtected returns the file that makes rel protected by derived
// protection, if any; with folded, rel and the entries are compared
// case-folded.
func (s *Service) derivedProtected(rel string, folded bool) (string, bool) {
	es := s.derived.entries.Load()
	if es == nil {
		return "", false
	}
	if folded {
		rel = sandbox.Fold(rel)
	}
	for _, e := range *es {
		p := e.Path
		if folded {
			p = e.Folded
		}
		if p == "" || rel == p || strings.HasPrefix(rel, p+"/") {
			return e.From, true
		}
	}
	return "", false
}

// refreshDerived brings derived protection up to date before a mutation
// of rel is judged: the first call walks the root for repositories; every
// call derives again the repositories whose sources changed, and those
// whose ".git" lies in an ancestor of rel and is not known yet.
func (s *Service) refreshDerived(rel string) {
	d := &s.derived
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	d.walk.Do(func() {
		d.repos = map[string]*derive.Repo{}
		for _, g := range s.findRepos() {
			d.repos[g] = derive.Derive(deriveRoot{s}, g)
		}
		changed = true
	})
	for g, r := range d.repos {
		if r.Stale(deriveRoot{s}) {
			if _, err := s.root.Lstat(g); err != nil {
				delete(d.repos, g)
			} else {
				d.repos[g] = derive.Derive(deriveRoot{s}, g)
			}
			changed = true
		}
	}
	for _, g := range s.gitEntriesAbove(rel) {
		if _, known := d.repos[g]; !known {
			d.repos[g] = derive.Derive(deriveRoot{s}, g)
			changed = true
		}
	}
	if changed {
		var all []derive.Entry
		for _, g := range slices.Sorted(maps.Keys(d.repos)) {
			all = append(all, d.repos[g].Entries...)
		}
		d.entries.Store(&all)
	}
}

// gitEntriesAbove returns the ".git" entries in the root and in each
// directory on the way to the real root-relative path rel, as git's own
// discovery would meet them from there. It descends from the root's
// descriptor one component at a time, never following a symlink (rel is
// a real path: its directories are none), two system calls a level.
func (s *Service) gitEntriesAbove(rel string) []string {
	var found []string
	fd, err := unix.Dup(s.rootPath.fd)
	if err != nil {
		return nil
	}
	dir := ""
	for comps := strings.Split(path.Dir(rel), "/"); ; comps = comps[1:] {
		var st unix.Stat_t
		if unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			found = append(found, joinRel(dir, ".git"))
		}
		if len(comps) == 0 || comps[0] == "." || comps[0] == "" {
			break
		}
		next, err := unix.Openat(fd, comps[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		unix.Close(fd)
		fd, dir = next, joinRel(dir, comps[0])
	}
	unix.Close(fd)
	return found
}

// derivedList is the current derived entries, for the attestation.
func (s *Service) derivedList() []derive.Entry {
	s.refreshDerived("")
	if es := s.derived.entries.Load(); es != nil {
		return *es
	}
	return nil
}

// attestation is the confinement, with the policy's derived entries as
// they are now.
func (s *Service) attestation() *fsmcpv1.Confinement {
	c := proto.Clone(s.confinement).(*fsmcpv1.Confinement)
	if c.Policy == nil {
		c.Policy = &fsmcpv1.Policy{}
	}
	for _, e := range s.derivedList() {
		c.Policy.Derived = append(c.Policy.Derived, &fsmcpv1.DerivedProtect{Path: e.Path, DerivedFrom: e.From})
	}
	return c
}

// deriveRoot is the Service's root as derive reads it.
type deriveRoot struct{ s *Service }

func (r deriveRoot) Open(rel string) (*os.File, error) {
	return r.s.root.OpenFile(rel, os.O_RDONLY|unix.O_NONBLOCK, 0)
}

func (r deriveRoot) Stat(rel string) (fs.FileInfo, error) { return r.s.root.Stat(rel) }

func (r deriveRoot) RealPath(rel string, f *os.File) (string, error) {
	return r.s.realPath("derive", rel, int(f.Fd()))
}

func (r deriveRoot) Name() string { return *r.s.rootPath.name.Load() }

// findRepos walks the root for ".git" entries, never following symlinks
// and never descending into a ".git" directory.
func (s *Service) findRepos() []string {
	f, err := s.root.Open(".")
	if err != nil {
		return nil
	}
	defer f.Close()
	var found []string
	w := &dirwalk.Walker{
		Visit: func(_ int, e fs.DirEntry, rel string) (bool, error) {
			if e.Name() == ".git" {
				found = append(found, rel)
				return false, nil
			}
			return true, nil
		},
		// What cannot be read, or lies too deep, holds no repository
		// to find.
		Fail: func(string, error) error { return nil },
	}
	w.Walk(int(f.Fd()), "")
	return found
}
