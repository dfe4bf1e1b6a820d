package worker

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
)

// Error is a failure with a contract error code: link.Error, which the
// front-end decodes with the same code that sends it.
type Error = link.Error

// missingDirectory marks err, a failure to open the directory that would
// hold the new name p, when that directory does not exist: the client
// creates it with fs_mkdir and tries again.
func missingDirectory(err error, p string) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND {
		return err
	}
	dir, _ := path.Split(p)
	if dir = strings.TrimSuffix(dir, "/"); dir == "" {
		return err
	}
	c := *e
	c.MissingDirectory = dir
	return &c
}

func newError(code fsmcpv1.ErrorCode, path, format string, args ...any) *Error {
	return link.Errorf(code, path, format, args...)
}

// fsError classifies an error from an os.Root method or a system call on a
// file it opened (link.FSError).
func fsError(op, path string, err error) *Error {
	return link.FSError(op, path, err)
}

// clientPath turns a client path into a name for os.Root, as the command
// runner does (link.ClientPath).
func clientPath(p []byte) (string, error) { return link.ClientPath(p) }

// isSHA256Hex reports whether s is a sha256 as the contract spells it
// (link.IsSHA256Hex).
func isSHA256Hex(s string) bool { return link.IsSHA256Hex(s) }

// bug reports a can't-happen error on stderr.
func bug(err error) {
	fmt.Fprintf(os.Stderr, "BUG(fsmcp): %v\n", err)
}
