package sandbox

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// RulesSubcommand is the hidden first argument that makes the fsmcp binary
// run as the reader of the --rules file.
const RulesSubcommand = "__rules"

// The --rules file is read by a process of its own, not by the worker.
// The worker faces the agent; to read the file again after an atomic
// replace (a new inode) a Landlock grant must name the file's directory,
// and a grant there would let a compromised worker read every file
// beside the rules (a token file, say). The reader is granted that
// directory and nothing else, takes no input from the agent (one request
// byte from the worker, answered with the file's version and bytes), and
// cannot write, execute, open sockets or signal outside its domain. The
// worker is granted nothing there.

// StartRulesReader starts exe as the rules reader of the file name in dir
// (an open directory, inherited as descriptor 3), with the worker's
// process attributes (no stdin or stdout, an empty environment, SIGKILL
// when the starting thread goes away) and returns the worker's end of its
// socket. The caller closes dir when it is started. allowNoLandlock is
// the worker's --allow-no-landlock.
func StartRulesReader(exe string, dir *os.File, name string, allowNoLandlock bool, stderr io.Writer) (*Worker, error) {
	return start(exe, []*os.File{dir}, func(fd int) []string {
		return []string{RulesSubcommand, "--dir-fd=3", "--sock-fd=" + strconv.Itoa(fd), "--name=" + name,
			"--allow-no-landlock=" + strconv.FormatBool(allowNoLandlock)}
	}, workerProcAttr(), stderr)
}

// ConfineRulesReader restricts the calling process to reading files
// beneath dirPath (a /proc/self/fd path of the directory it inherited):
// no other file, no directory listing, no write or execute anywhere, no
// TCP, scoped IPC; then the seccomp filter of a process that starts
// nothing and opens no socket (FilterFrontend without a listener).
func ConfineRulesReader(dirPath string) (Status, Seccomp, error) {
	r := landlock.AccessFSSet(ll.AccessFSReadFile)
	st, err := restrict([]landlock.Rule{landlock.PathAccess(r, dirPath)}, []string{fmt.Sprintf("--rules directory %s", r)}, true)
	if err != nil {
		return st, Seccomp{}, err
	}
	sc, err := FilterFrontend(false)
	return st, sc, err
}
