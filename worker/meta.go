package worker

import (
	"errors"
	"os"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/filemeta"
)

// copyMetadata gives dst, the new content of p, the metadata of src
// (filemeta.Copy); what cannot be kept exactly is unsupported.
func copyMetadata(p string, src, dst *os.File) error {
	return metaError(p, filemeta.Copy(src, dst))
}

// copyFlags gives dst, still empty, the kept inode flags of src
// (filemeta.CopyFlags).
func copyFlags(p string, src, dst *os.File) error {
	return metaError(p, filemeta.CopyFlags(src, dst))
}

// metaError answers a failure of filemeta for p: a call that failed is
// classified as any other, what cannot be kept is unsupported.
func metaError(p string, err error) error {
	var se *os.SyscallError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fsError(se.Syscall, p, se.Err)
	}
	return newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, p, "%s; the file was not changed", err)
}

func modeString(m uint32) string { return filemeta.ModeString(m) }
