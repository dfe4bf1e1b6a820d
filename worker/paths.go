package worker

import (
	"bytes"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// cleanPath turns a client path into a name for os.Root: one leading "/" is
// stripped, and "" names the root. It does no other canonicalisation:
// "..", further slashes and symlinks are os.Root's to resolve or refuse.
func cleanPath(p []byte) (string, error) {
	if bytes.IndexByte(p, 0) >= 0 {
		return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "path contains a NUL byte")
	}
	p = bytes.TrimPrefix(p, []byte("/"))
	if len(p) == 0 {
		return ".", nil
	}
	return string(p), nil
}
