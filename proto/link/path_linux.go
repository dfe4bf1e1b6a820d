package link

import (
	"bytes"
	"os"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// ClientPath turns a client path into a name for os.Root: one leading "/"
// is stripped, "" names the root, and a NUL byte is refused. It does no
// other canonicalisation: "..", further slashes and symlinks are the
// Root's to resolve or refuse, and the policy judges what they resolved
// to, not this string.
func ClientPath(p []byte) (string, error) {
	if bytes.IndexByte(p, 0) >= 0 {
		return "", Errorf(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "path contains a NUL byte")
	}
	if len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	if len(p) == 0 {
		return ".", nil
	}
	return string(p), nil
}

// OpenDir resolves the client path p beneath root the way every RPC does
// and opens it as a directory. The command runner uses it for a command's
// working directory: it holds its own *os.Root on its own view of the root
// (it runs in another mount namespace), so it needs the resolution, not
// the worker's descriptor. A failure is an *Error with the contract's code
// (outside_root for an escape by "..", or by a symlink that leaves).
func OpenDir(root *os.Root, p []byte) (*os.File, error) {
	name, err := ClientPath(p)
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, FSError("open directory", string(p), err)
	}
	return f, nil
}

// IsSHA256Hex reports whether s is a sha256 digest as the contract spells
// one: 64 lowercase hex digits.
func IsSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
