package link

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failure with a contract error code. Its message never holds a
// host path. A server returns it from an RPC, which sends it as a status
// with an fsmcp.v1.Error detail (GRPCStatus); the caller reads it back
// with Decode.
type Error struct {
	Code    fsmcpv1.ErrorCode
	Message string
	Path    string
	// CurrentSHA256 is set on precondition_failed when the file exists.
	CurrentSHA256 string
	// Count is set on ambiguous_match.
	Count int64
	// PolicyViolation marks a refusal by the operator's policy.
	PolicyViolation bool
	// Nearest is set on no_match when a close candidate was found.
	Nearest *fsmcpv1.Nearest
	// MissingDirectory is set on not_found when the directory a new name
	// needs does not exist.
	MissingDirectory string
	// Offset is set on invalid_argument about text or a file in a
	// charset: the byte offset where it stops holding.
	Offset *int64
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code, so that
// errors.Is compares codes through any wrapping.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf is an *Error with code, about path ("" for none), with a message
// from format and args.
func Errorf(code fsmcpv1.ErrorCode, path, format string, args ...any) *Error {
	return &Error{Code: code, Path: path, Message: fmt.Sprintf(format, args...)}
}

// maxErrorPath and maxErrorMessage bound what an error carries back. A
// status travels in HTTP/2 headers: an unbounded one (a client's 64 MiB
// path, echoed) would break the connection and with it the server.
const (
	maxErrorPath    = 4096
	maxErrorMessage = 1024
)

// clip shortens s to at most n bytes, at a UTF-8 boundary when s is text.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > n-utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// GRPCStatus carries the error to the caller as a status with an
// fsmcp.v1.Error detail.
func (e *Error) GRPCStatus() *status.Status {
	detail := e.Detail()
	st := status.New(codes.Unknown, detail.Message)
	d, err := st.WithDetails(detail)
	if err != nil {
		fmt.Fprintf(os.Stderr, "BUG(fsmcp): %v\n", err)
		return st
	}
	return d
}

// Detail is e as it travels, clipped.
func (e *Error) Detail() *fsmcpv1.Error {
	return &fsmcpv1.Error{
		Code:             e.Code,
		Message:          clip(e.Message, maxErrorMessage),
		Path:             []byte(clip(e.Path, maxErrorPath)),
		CurrentSha256:    e.CurrentSHA256,
		Count:            e.Count,
		PolicyViolation:  e.PolicyViolation,
		Nearest:          e.Nearest,
		MissingDirectory: []byte(clip(e.MissingDirectory, maxErrorPath)),
		Offset:           e.Offset,
	}
}

// FromDetail is the error d, as Detail sent it.
func FromDetail(d *fsmcpv1.Error) *Error {
	return &Error{Code: d.GetCode(), Message: d.GetMessage(), Path: string(d.GetPath()),
		CurrentSHA256: d.GetCurrentSha256(), Count: d.GetCount(), PolicyViolation: d.GetPolicyViolation(),
		Nearest: d.GetNearest(), MissingDirectory: string(d.GetMissingDirectory()), Offset: d.Offset}
}

// Decode is the error an RPC failed with: the *Error the server sent, or,
// when the call failed in the transport, the contract's code for how it
// failed. It is never nil.
func Decode(err error) *Error {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if e, ok := d.(*fsmcpv1.Error); ok {
			return FromDetail(e)
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		return Errorf(fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE, "", "the worker is unavailable")
	case codes.Canceled:
		return Errorf(fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED, "", "the call was cancelled")
	case codes.DeadlineExceeded:
		return Errorf(fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT, "", "the call timed out")
	case codes.ResourceExhausted:
		return Errorf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "", "the request or reply is too large")
	}
	return Errorf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "", "internal error")
}

// escapeText is the text of os.Root's unexported error for a path that
// leaves the root. IsEscape is the one place that relies on it; a test
// provokes a real escape to pin it.
const escapeText = "path escapes from parent"

// IsEscape reports whether err is os.Root's refusal of a path that leaves
// the root.
func IsEscape(err error) bool {
	for err != nil {
		if err.Error() == escapeText {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// FSError classifies an error from an os.Root method or a system call on
// a file it opened. The message is the operation and the errno text, which
// holds no path. An *Error passes through as it is.
func FSError(op, path string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code, reason := Classify(err)
	return &Error{Code: code, Path: path, Message: op + ": " + reason}
}

// Classify is the contract's code for err, an error of a system call or of
// the context, with a reason that holds no path.
func Classify(err error) (fsmcpv1.ErrorCode, string) {
	var errno syscall.Errno
	switch {
	case IsEscape(err):
		return fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT, "path leaves the root"
	case errors.Is(err, context.Canceled):
		return fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED, "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT, "deadline exceeded"
	case !errors.As(err, &errno):
		return fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "internal error"
	}
	code := fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL
	switch errno {
	case syscall.ENOENT:
		code = fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND
	case syscall.EEXIST:
		code = fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS
	case syscall.ENOTDIR:
		code = fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY
	case syscall.EISDIR:
		code = fsmcpv1.ErrorCode_ERROR_CODE_IS_A_DIRECTORY
	case syscall.ENOTEMPTY:
		code = fsmcpv1.ErrorCode_ERROR_CODE_NOT_EMPTY
	case syscall.EACCES, syscall.EPERM, syscall.EROFS:
		code = fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED
	case syscall.ELOOP, syscall.ENAMETOOLONG, syscall.EINVAL:
		code = fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT
	case syscall.EFBIG, syscall.ENOSPC, syscall.EDQUOT:
		code = fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE
	case syscall.EXDEV, syscall.EOPNOTSUPP, syscall.EBUSY:
		code = fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED
	case syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN, syscall.ENOMEM, syscall.ENOBUFS:
		// Transient exhaustion of descriptors, processes, threads or
		// kernel memory: the call may succeed when retried.
		code = fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE
	}
	return code, errno.Error()
}
