package sandbox

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ExecDeps returns the files the kernel and the dynamic loader open to run
// the ELF executable at path: the executable, its interpreter and,
// transitively, every DT_NEEDED library, each as an absolute path with
// symlinks resolved. A confined process needs read and execute on exactly
// these to exec path. It resolves libraries the way the loader does for a
// plain binary (RPATH/RUNPATH, then the ld.so.conf directories, then the
// default directories); it does not model LD_LIBRARY_PATH, which the worker
// never sets, or dlopen at run time.
func ExecDeps(path string) ([]string, error) {
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	r := resolver{seen: map[string]bool{}, conf: loaderConfDirs("/etc/ld.so.conf", 0)}
	if err := r.add(path, true); err != nil {
		return nil, err
	}
	return r.files, nil
}

type resolver struct {
	seen  map[string]bool
	files []string
	conf  []string
	class elf.Class
	mach  elf.Machine
}

func (r *resolver) add(path string, top bool) error {
	if r.seen[path] {
		return nil
	}
	r.seen[path] = true
	r.files = append(r.files, path)
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("read ELF %s: %w", path, err)
	}
	defer f.Close()
	if top {
		r.class, r.mach = f.Class, f.Machine
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return fmt.Errorf("read interpreter of %s: %w", path, err)
			}
			interp, err := filepath.EvalSymlinks(strings.TrimRight(string(b), "\x00"))
			if err != nil {
				return fmt.Errorf("interpreter of %s: %w", path, err)
			}
			if err := r.add(interp, false); err != nil {
				return err
			}
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("read DT_NEEDED of %s: %w", path, err)
	}
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				dirs = append(dirs, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(path)))
			}
		}
	}
	dirs = append(dirs, r.conf...)
	dirs = append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	for _, lib := range needed {
		found, err := r.find(lib, dirs)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", path, lib, err)
		}
		if err := r.add(found, false); err != nil {
			return err
		}
	}
	return nil
}

// find returns the first candidate for lib that is an ELF file of the
// executable's class and machine, as the loader skips the others.
func (r *resolver) find(lib string, dirs []string) (string, error) {
	if strings.Contains(lib, "/") {
		return filepath.EvalSymlinks(lib)
	}
	for _, d := range dirs {
		p, err := filepath.EvalSymlinks(filepath.Join(d, lib))
		if err != nil {
			continue
		}
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		ok := f.Class == r.class && f.Machine == r.mach
		f.Close()
		if ok {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// loaderConfDirs reads the directories listed in an ld.so.conf file,
// following its include lines.
func loaderConfDirs(name string, depth int) []string {
	f, err := os.Open(name)
	if err != nil || depth > 8 {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "":
		case strings.HasPrefix(line, "include "):
			pat := strings.TrimSpace(strings.TrimPrefix(line, "include "))
			if !filepath.IsAbs(pat) {
				pat = filepath.Join(filepath.Dir(name), pat)
			}
			matches, _ := filepath.Glob(pat)
			for _, m := range matches {
				dirs = append(dirs, loaderConfDirs(m, depth+1)...)
			}
		default:
			dirs = append(dirs, line)
		}
	}
	return dirs
}
