package worker

import (
	"os"

	"golang.org/x/sys/unix"
)

// OpenDir resolves the client path p beneath root the way every RPC does
// and opens it as a directory. The command runner uses it for a command's
// working directory: it holds its own *os.Root on its own view of the root
// (it runs in another mount namespace), so it needs the resolution, not
// the worker's descriptor. A failure is an *Error with the contract's code
// (outside_root for an escape by "..", or by a symlink that leaves).
func OpenDir(root *os.Root, p []byte) (*os.File, error) {
	name, err := clientPath(p)
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fsError("open directory", string(p), err)
	}
	return f, nil
}
