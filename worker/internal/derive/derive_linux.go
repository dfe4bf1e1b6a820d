package derive

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/internal/gitconfig"
)

// Root is the root as a derivation reads it: through the worker's
// os.Root, symlinks followed inside it.
type Root interface {
	// Open opens the root-relative rel for reading, without blocking.
	Open(rel string) (*os.File, error)
	// Stat is the stat of rel, symlinks followed.
	Stat(rel string) (fs.FileInfo, error)
	// RealPath is the real root-relative path of f, opened as rel.
	RealPath(rel string, f *os.File) (string, error)
	// Name is the root's path on the host.
	Name() string
}

// Entry is one path the policy protects because of a repository's
// configuration.
type Entry struct {
	Path   string // root-relative; "" is the whole root
	From   string // the root-relative file that made it so
	Folded string // Path, case-folded (sandbox.Fold)
}

// Repo is what one ".git" entry's configuration derives: its Entries,
// and the files they came from.
type Repo struct {
	sources []source
	Entries []Entry
}

// source is one file a repository's entries came from, and its stamp
// when they were derived (zero while it did not exist).
type source struct {
	rel   string
	stamp stamp
}

// maxIncludeDepth is git's bound on nested includes.
const maxIncludeDepth = 10

// maxConfigBytes bounds one configuration file the worker reads.
const maxConfigBytes = 1 << 20

// maxConfigFiles bounds the configuration files read for one repository:
// includes nest 10 deep and may each include many, so their number grows
// as a power of their fan-out.
const maxConfigFiles = 64

// Stale reports whether a source of r changed since r was derived.
func (r *Repo) Stale(root Root) bool {
	for _, src := range r.sources {
		if stampOf(root, src.rel) != src.stamp {
			return true
		}
	}
	return false
}

// deriver gathers one repository's sources and entries.
type deriver struct {
	root    Root
	top     string // the worktree's top: the directory holding ".git"
	sources []source
	entries []Entry
	files   int // configuration files read so far
}

func (d *deriver) source(rel string) {
	d.sources = append(d.sources, source{rel: rel, stamp: stampOf(d.root, rel)})
}

func (d *deriver) protect(rel, from string) {
	e := Entry{Path: rel, From: from, Folded: sandbox.Fold(rel)}
	if !slices.Contains(d.entries, e) {
		d.entries = append(d.entries, e)
	}
}

// Derive derives the entries of the ".git" entry at the root-relative
// path g.
func Derive(root Root, g string) *Repo {
	d := &deriver{root: root, top: path.Dir(g)}
	if d.top == "." {
		d.top = ""
	}
	d.source(g)
	gitDir, ok := d.gitDir(g)
	if ok {
		common := gitDir
		cd := join(gitDir, "commondir")
		d.source(cd)
		if text, err := d.read(cd); err == nil {
			if c, ok := d.hostRel(gitDir, strings.TrimSpace(string(text))); ok {
				common = c
				if common != gitDir {
					d.protect(common, cd)
				}
			}
		}
		d.config(join(common, "config"), 0)
		d.config(join(gitDir, "config.worktree"), 0)
	}
	return &Repo{sources: d.sources, Entries: d.entries}
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
	if fi, err := d.root.Stat(g); err == nil && fi.IsDir() {
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
	gd, ok := d.hostRel(d.top, strings.TrimSpace(target))
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
	f, err := d.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
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
			if h, ok := d.hostRel(d.top, v.Value); ok {
				d.protect(h, rel)
				if r := d.resolve(h); r != h {
					d.protect(r, rel)
				}
			}
		case v.Name() == "path" && !v.NoValue && (v.Key == "include.path" || v.Section() == "includeif" && v.Subsection() != ""):
			inc, ok := d.hostRel(dir, v.Value)
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
	f, err := d.root.Open(rel)
	if err != nil {
		return "", false
	}
	defer f.Close()
	r, err := d.root.RealPath(rel, f)
	return r, err == nil
}

// hostRel resolves a path git reads from configuration (v, relative to
// the root-relative directory base, or absolute on the host) to a
// root-relative path, lexically; ok is false for one outside the root or
// relative to a home directory ("~"), which are not the root's.
func (d *deriver) hostRel(base, v string) (string, bool) {
	switch {
	case v == "" || strings.HasPrefix(v, "~") || strings.HasPrefix(v, "%(prefix)/"):
		return "", false
	case strings.HasPrefix(v, "/"):
		return under(path.Clean(v), d.root.Name())
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
			return join(real, rest)
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

// stamp tells one version of a file from another.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// stampOf is the stamp of the root-relative file rel, followed (git
// follows symlinks), zero when it cannot be reached.
func stampOf(root Root, rel string) stamp {
	fi, err := root.Stat(rel)
	if err != nil {
		return stamp{}
	}
	st := fi.Sys().(*syscall.Stat_t)
	return stamp{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}
}

// join joins a root-relative directory and a name.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// under makes name relative to root, if it lies there.
func under(name, root string) (string, bool) {
	switch {
	case name == root:
		return "", true
	case root == "/":
		return name[1:], strings.HasPrefix(name, "/")
	case len(name) > len(root) && name[len(root)] == '/' && name[:len(root)] == root:
		return name[len(root)+1:], true
	}
	return "", false
}
