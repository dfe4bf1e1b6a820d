package selftest

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

// Config is what the probes need, gathered before confinement.
type Config struct {
	// Outside is a path outside the root, to open.
	Outside string
	// Exe is a program the worker is not granted, to exec.
	Exe string
	// DevNull is the child's stdin, stdout and stderr: a confined worker
	// cannot open /dev/null, and os/exec would try.
	DevNull *os.File
	// FSEnforced, NetEnforced and SeccompEnforced say which refusals are
	// expected.
	FSEnforced, NetEnforced, SeccompEnforced bool
}

// probeNames, in the order they run and are listed.
const (
	probeOpen      = "open outside the root"
	probeOpenMode3 = "access-mode-3 open outside the root"
	probeTCP       = "tcp socket"
	probeExec      = "exec of a program not granted"
)

// Run runs the probes and returns them, with an error naming the
// first that the enforced confinement should have refused and did not.
func Run(c Config) ([]*fsmcpv1.Probe, error) {
	var probes []*fsmcpv1.Probe
	var failed []string
	add := func(name string, err error, expected bool) {
		p := &fsmcpv1.Probe{Name: name, Result: answer(err), Refused: refusedBy(err)}
		probes = append(probes, p)
		if expected && !p.Refused {
			failed = append(failed, fmt.Sprintf("%s: %s", name, p.Result))
		}
	}
	if c.Outside == "" {
		probes = append(probes, &fsmcpv1.Probe{Name: probeOpen, Result: "skipped: the root is /, nothing is outside it"})
	} else {
		add(probeOpen, probeOpenOutside(c.Outside, unix.O_RDONLY), c.FSEnforced)
		// No Landlock right governs an open with access mode 3, whose
		// descriptor fchmod and fsetxattr accept: the filter refuses it.
		add(probeOpenMode3, probeOpenOutside(c.Outside, 3), c.SeccompEnforced)
	}
	add(probeTCP, probeSocket(), c.NetEnforced)
	add(probeExec, probeExecute(c.Exe, c.DevNull), c.FSEnforced)
	if len(failed) > 0 {
		return probes, fmt.Errorf("self-test failed, refusing to serve unconfined: the kernel allowed %s", strings.Join(failed, "; "))
	}
	return probes, nil
}

// OutsidePath is the directory above the root, the nearest place outside
// it; "" for a root of "/", which has no outside.
func OutsidePath(rootName string) string {
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
