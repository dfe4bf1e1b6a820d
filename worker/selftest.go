package worker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

// The self-test: once confined, before serving, the worker tries on
// itself what its confinement must refuse, and reports each kernel answer
// in confinement.selftest. A probe that the enforced layers should have
// refused but that succeeds ends start-up: fsmcp never serves unconfined
// by accident. Under --allow-no-landlock, what the missing layer would
// have refused is reported as allowed and does not end start-up.
//
// It does not prove the confinement complete: four probes sample three
// layers (Landlock's filesystem rules, the seccomp filter's socket and
// access-mode-3 rules, Landlock's execute right); the enforcing tests
// cover the rest.

// selftestConfig is what the probes need, gathered before confinement.
type selftestConfig struct {
	// outside is a path outside the root, to open.
	outside string
	// exe is a program the worker is not granted, to exec.
	exe string
	// devNull is the child's stdin, stdout and stderr: a confined worker
	// cannot open /dev/null, and os/exec would try.
	devNull *os.File
	// fsEnforced, netEnforced and seccompEnforced say which refusals are
	// expected.
	fsEnforced, netEnforced, seccompEnforced bool
}

// probeNames, in the order they run and are listed.
const (
	probeOpen      = "open outside the root"
	probeOpenMode3 = "access-mode-3 open outside the root"
	probeTCP       = "tcp socket"
	probeExec      = "exec of a program not granted"
)

// selftest runs the probes and returns them, with an error naming the
// first that the enforced confinement should have refused and did not.
func selftest(c selftestConfig) ([]*fsmcpv1.Probe, error) {
	var probes []*fsmcpv1.Probe
	var failed []string
	add := func(name string, err error, expected bool) {
		p := &fsmcpv1.Probe{Name: name, Result: answer(err), Refused: refusedBy(err)}
		probes = append(probes, p)
		if expected && !p.Refused {
			failed = append(failed, fmt.Sprintf("%s: %s", name, p.Result))
		}
	}
	if c.outside == "" {
		probes = append(probes, &fsmcpv1.Probe{Name: probeOpen, Result: "skipped: the root is /, nothing is outside it"})
	} else {
		add(probeOpen, probeOpenOutside(c.outside, unix.O_RDONLY), c.fsEnforced)
		// No Landlock right governs an open with access mode 3, whose
		// descriptor fchmod and fsetxattr accept: the filter refuses it.
		add(probeOpenMode3, probeOpenOutside(c.outside, 3), c.seccompEnforced)
	}
	add(probeTCP, probeSocket(), c.netEnforced)
	add(probeExec, probeExecute(c.exe, c.devNull), c.fsEnforced)
	if len(failed) > 0 {
		return probes, fmt.Errorf("self-test failed, refusing to serve unconfined: the kernel allowed %s", strings.Join(failed, "; "))
	}
	return probes, nil
}

// outsidePath is the directory above the root, the nearest place outside
// it; "" for a root of "/", which has no outside.
func outsidePath(rootName string) string {
	if rootName == "/" {
		return ""
	}
	return filepath.Dir(rootName)
}

// probeOpenOutside opens path with access mode (O_RDONLY, as any read
// tool would, or 3).
func probeOpenOutside(path string, mode int) error {
	fd, err := unix.Open(path, mode|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// probeSocket creates a TCP socket and, should that be allowed, connects
// it to the loopback discard port.
func probeSocket() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}})
}

// probeExecute starts exe in a child, which must fail at execve. Should
// it start, it is the worker's own binary given arguments that make it
// exit at once, and it is reaped.
func probeExecute(exe string, devNull *os.File) error {
	cmd := exec.Command(exe, sandbox.WorkerSubcommand, "--selftest-exec-must-be-refused")
	cmd.Env = []string{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, devNull, devNull
	if err := cmd.Start(); err != nil {
		return err
	}
	cmd.Wait()
	return nil
}

// answer is the kernel's answer as an errno name, or "allowed".
func answer(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "allowed"
	case errors.As(err, &errno):
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return errno.Error()
	}
	return err.Error()
}

// refusedBy reports whether err is a refusal by the confinement:
// Landlock answers EACCES, the seccomp filter EPERM.
func refusedBy(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
}
