package worker

import (
	"errors"
	"io"
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
	"github.com/fsmcp/fsmcp/worker/internal/dirwalk"
	"github.com/fsmcp/fsmcp/worker/internal/gitconfig"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
)

// Derived protection: beside the operator's globs, the policy protects
// what the configuration of each git repository in the root makes git run
// or read as configuration: the hooks directory that core.hooksPath names,
// the files include.path and includeIf.*.path pull in, and the git
// directory a ".git" file or symlink points at. The configuration is read
// by gitconfig, in Go, through the Root: nothing runs.
//
// Repositories are the ".git" entries (directories, files, symlinks) in
// the root. They are found by one walk of the tree, when the start-up
// sweep begins or at the first mutation if that comes first (reads never
// wait for it), and at every mutation git's own discovery is
// repeated for the mutated path: each of its ancestors is asked for a
// ".git" the walk did not know (one the host made since). Each repository
// keeps the stamps (identity, size, mtime, ctime) of the files its entries
// came from; every mutation compares them first and derives a repository
// again when one changed, so an edit of .git/config by the host counts
// from the next call on.
//
// What it cannot see: configuration outside the root (the user's and the
// system's, which may set core.hooksPath or include files in the root),
// a repository enclosing the root, and bare repositories (no ".git"
// entry). includeIf conditions are not evaluated: every conditional file
// counts, which can only protect more.

// derivedEntry is one path the policy protects because of a repository's
// configuration.
type derivedEntry struct {
	path   string // root-relative; "" is the whole root
	from   string // the root-relative file that made it so
	folded string // path, case-folded (sandbox.Fold)
}

// derivation is the Service's derived protection.
type derivation struct {
	mu    sync.Mutex
	walk  sync.Once
	repos map[string]*repo // by the root-relative path of the ".git" entry
	// entries is every repository's entries, replaced whole.
	entries atomic.Pointer[[]derivedEntry]
}

// repo is what one ".git" entry's configuration derives.
type repo struct {
	sources []source
	entries []derivedEntry
}

// source is one file a repository's entries came from, and its stamp
// when they were derived (zero while it did not exist).
type source struct {
	rel   string
	stamp fileStamp
}

// maxIncludeDepth is git's bound on nested includes.
const maxIncludeDepth = 10

// maxConfigBytes bounds one configuration file the worker reads.
const maxConfigBytes = 1 << 20

// maxConfigFiles bounds the configuration files read for one repository:
// includes nest 10 deep and may each include many, so their number grows
// as a power of their fan-out.
const maxConfigFiles = 64

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
		p := e.path
		if folded {
			p = e.folded
		}
		if p == "" || rel == p || strings.HasPrefix(rel, p+"/") {
			return e.from, true
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
		d.repos = map[string]*repo{}
		for _, g := range s.findRepos() {
			d.repos[g] = s.deriveRepo(g)
		}
		changed = true
	})
	for g, r := range d.repos {
		if r.stale(s) {
			if _, err := s.root.Lstat(g); err != nil {
				delete(d.repos, g)
			} else {
				d.repos[g] = s.deriveRepo(g)
			}
			changed = true
		}
	}
	for _, g := range s.gitEntriesAbove(rel) {
		if _, known := d.repos[g]; !known {
			d.repos[g] = s.deriveRepo(g)
			changed = true
		}
	}
	if changed {
		var all []derivedEntry
		for _, g := range slices.Sorted(maps.Keys(d.repos)) {
			all = append(all, d.repos[g].entries...)
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
func (s *Service) derivedList() []derivedEntry {
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
		c.Policy.Derived = append(c.Policy.Derived, &fsmcpv1.DerivedProtect{Path: e.path, DerivedFrom: e.from})
	}
	return c
}

// stale reports whether a source of r changed since r was derived.
func (r *repo) stale(s *Service) bool {
	for _, src := range r.sources {
		if s.stampOf(src.rel) != src.stamp {
			return true
		}
	}
	return false
}

// stampOf is the stamp of the root-relative file rel, followed (git
// follows symlinks), zero when it cannot be reached.
func (s *Service) stampOf(rel string) fileStamp {
	fi, err := s.root.Stat(rel)
	if err != nil {
		return fileStamp{}
	}
	return stampOf(toStat(fi))
}

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

// deriver gathers one repository's sources and entries.
type deriver struct {
	s       *Service
	top     string // the worktree's top: the directory holding ".git"
	sources []source
	entries []derivedEntry
	files   int // configuration files read so far
}

func (d *deriver) source(rel string) {
	d.sources = append(d.sources, source{rel: rel, stamp: d.s.stampOf(rel)})
}

func (d *deriver) protect(rel, from string) {
	e := derivedEntry{path: rel, from: from, folded: sandbox.Fold(rel)}
	if !slices.Contains(d.entries, e) {
		d.entries = append(d.entries, e)
	}
}

// deriveRepo derives the entries of the ".git" entry at the
// root-relative path g.
func (s *Service) deriveRepo(g string) *repo {
	d := &deriver{s: s, top: path.Dir(g)}
	if d.top == "." {
		d.top = ""
	}
	d.source(g)
	gitDir, ok := d.gitDir(g)
	if ok {
		common := gitDir
		cd := joinRel(gitDir, "commondir")
		d.source(cd)
		if text, err := d.read(cd); err == nil {
			if c, ok := d.s.hostRel(gitDir, strings.TrimSpace(string(text))); ok {
				common = c
				if common != gitDir {
					d.protect(common, cd)
				}
			}
		}
		d.config(joinRel(common, "config"), 0)
		d.config(joinRel(gitDir, "config.worktree"), 0)
	}
	return &repo{sources: d.sources, entries: d.entries}
}

// gitDir is the real root-relative git directory of the ".git" entry g:
// itself, where it points as a symlink, or what its "gitdir:" line names.
func (d *deriver) gitDir(g string) (string, bool) {
	real, ok := d.real(g)
	if !ok {
		return "", false
	}
	if real != g {
		d.protect(real, g)
	}
	if fi, err := d.s.root.Stat(g); err == nil && fi.IsDir() {
		return real, true
	}
	text, err := d.read(g)
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(text), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", false
	}
	gd, ok := d.s.hostRel(d.top, strings.TrimSpace(target))
	if !ok {
		return "", false
	}
	gd = d.resolve(gd)
	d.protect(gd, g)
	return gd, true
}

// read reads the root-relative regular file rel (symlinks followed inside
// the root), bounded. It never opens a fifo or a device: the open is
// non-blocking and the type is checked before any read.
func (d *deriver) read(rel string) ([]byte, error) {
	f, err := d.s.root.OpenFile(rel, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := fstat(f)
	if err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err == nil && len(b) > maxConfigBytes {
		err = errors.New("configuration file too large")
	}
	return b, err
}

// config reads one configuration file and what it includes, and protects
// the hooks directories it names. A file that exists but cannot be read
// or parsed, or one past maxConfigFiles, protects the whole worktree: what
// git would run is unknown.
func (d *deriver) config(rel string, depth int) {
	if d.files++; d.files > maxConfigFiles {
		d.protect(d.top, rel)
		return
	}
	d.source(rel)
	text, err := d.read(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var vars []gitconfig.Var
	if err == nil {
		vars, err = gitconfig.Parse(text)
	}
	if err != nil {
		d.protect(d.top, rel)
		return
	}
	dir := path.Dir(rel)
	if dir == "." {
		dir = ""
	}
	for _, v := range vars {
		switch {
		case v.Key == "core.hookspath" && !v.NoValue:
			if h, ok := d.s.hostRel(d.top, v.Value); ok {
				d.protect(h, rel)
				if r := d.resolve(h); r != h {
					d.protect(r, rel)
				}
			}
		case v.Name() == "path" && !v.NoValue && (v.Key == "include.path" || v.Section() == "includeif" && v.Subsection() != ""):
			inc, ok := d.s.hostRel(dir, v.Value)
			if !ok {
				continue
			}
			d.protect(inc, rel)
			if r := d.resolve(inc); r != inc {
				d.protect(r, rel)
			}
			if depth < maxIncludeDepth {
				d.config(inc, depth+1)
			}
		}
	}
}

// real is the real root-relative path of rel, symlinks followed inside
// the root; ok is false when it cannot be reached. The open is
// non-blocking, so a fifo cannot hold it.
func (d *deriver) real(rel string) (string, bool) {
	f, err := d.s.root.OpenFile(rel, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	r, err := d.s.realPath("derive", rel, int(f.Fd()))
	return r, err == nil
}

// hostRel resolves a path git reads from configuration (v, relative to
// the root-relative directory base, or absolute on the host) to a
// root-relative path, lexically; ok is false for one outside the root or
// relative to a home directory ("~"), which are not the root's.
func (s *Service) hostRel(base, v string) (string, bool) {
	switch {
	case v == "" || strings.HasPrefix(v, "~") || strings.HasPrefix(v, "%(prefix)/"):
		return "", false
	case strings.HasPrefix(v, "/"):
		return under(path.Clean(v), *s.rootPath.name.Load())
	}
	j := path.Join(base, v)
	if j == ".." || strings.HasPrefix(j, "../") {
		return "", false
	}
	if j == "." {
		j = ""
	}
	return j, true
}

// resolve is the real path of the root-relative rel: the real path of
// its deepest ancestor that exists (symlinks followed inside the root),
// with the rest appended. It is rel when nothing is found.
func (d *deriver) resolve(rel string) string {
	for pre, rest := rel, ""; ; {
		name := pre
		if name == "" {
			name = "."
		}
		if real, ok := d.real(name); ok {
			if rest == "" {
				return real
			}
			return joinRel(real, rest)
		}
		if pre == "" {
			return rel
		}
		if rest == "" {
			rest = path.Base(pre)
		} else {
			rest = path.Base(pre) + "/" + rest
		}
		if pre = path.Dir(pre); pre == "." {
			pre = ""
		}
	}
}
