package command

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/fsmcp/fsmcp/sandbox"
)

// Granting a program grants what it runs as part of itself, and nothing
// else: a toolchain's own helper programs, found at start by asking the
// program (before any confinement, with an empty environment), each with
// its interpreter and libraries. Two kinds are known:
//   - go: every program in `go env GOTOOLDIR` (compile, asm, link, vet,
//     cgo, cover, ...);
//   - a gcc-style driver (cc, gcc, c++, g++, gcc-N, TRIPLE-gcc[-N], the
//     name granted or the file it resolves to): what `-print-prog-name`
//     names for driverHelpers, found on the commands' PATH when the
//     driver gives a bare name (as, ld).
//
// Anything else a toolchain runs (make running cc, cargo running rustc
// and a linker, a test binary) must be granted itself, with --exec, or
// built by a command under --exec-native.

// driverHelpers are the programs a gcc-style driver runs.
var driverHelpers = []string{"cc1", "cc1plus", "as", "ld", "collect2", "lto-wrapper", "lto1"}

// gccDriver matches the base names of gcc-style drivers.
var gccDriver = regexp.MustCompile(`^(cc|c\+\+|gcc|g\+\+|([a-z0-9_]+-)+(gcc|g\+\+))(-[0-9.]+)?$`)

// toolHelpers returns the helper programs of the granted program at path
// (symlinks resolved to real), in the order found.
func toolHelpers(path, real string) ([]string, error) {
	base, realBase := filepath.Base(path), filepath.Base(real)
	switch {
	case base == "go" || realBase == "go":
		// No HOME: go would make its telemetry directory there.
		dir, err := version([]string{path, "env", "GOTOOLDIR"}, []string{"GOTOOLCHAIN=local"})
		if err != nil {
			return nil, err
		}
		return programsIn(dir)
	case gccDriver.MatchString(base) || gccDriver.MatchString(realBase):
		var helpers []string
		for _, name := range driverHelpers {
			p, err := version([]string{path, "-print-prog-name=" + name}, nil)
			if err != nil {
				return nil, err
			}
			if !filepath.IsAbs(p) {
				if p, err = lookPath(p); err != nil {
					continue // not installed: the driver cannot run it either
				}
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				helpers = append(helpers, p)
			}
		}
		return helpers, nil
	}
	return nil, nil
}

// programsIn lists the executable regular files of dir.
func programsIn(dir string) ([]string, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("tool directory %q is not absolute", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

// lookPath finds name on the commands' PATH (baseEnv), as the driver
// will when it runs it.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("%s: not a bare name", name)
	}
	for _, dir := range filepath.SplitList(strings.TrimPrefix(baseEnv[0], "PATH=")) {
		p := filepath.Join(dir, name)
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// helperFiles are the helpers with their interpreters and libraries.
func helperFiles(helpers []string) ([]string, error) {
	var files []string
	for _, h := range helpers {
		deps, err := sandbox.ExecDeps(h)
		if err != nil {
			return nil, fmt.Errorf("helper %s: %w", h, err)
		}
		files = append(files, deps...)
	}
	return files, nil
}
