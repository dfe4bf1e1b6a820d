package link

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// An *Error a handler returns reaches the caller whole through a real
// connection: Decode gives back every field.
func TestErrorTravels(t *testing.T) {
	sent := &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, Message: "write: changed", Path: "a/\xff\x00b",
		CurrentSHA256: strings.Repeat("ab", 32), Count: 7, PolicyViolation: true,
		Nearest: &fsmcpv1.Nearest{LineNumber: 3, Offset: 9, Differs: "case"}, MissingDirectory: "a/b", Offset: new(int64(11))}
	c := serve(t, &hello{answer: func() (*fsmcpv1.HelloResponse, error) { return nil, fmt.Errorf("wrapped: %w", sent) }})
	_, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{}, grpc.WaitForReady(true))
	got := Decode(err)
	if !proto.Equal(got.Nearest, sent.Nearest) {
		t.Errorf("Nearest = %v, want %v", got.Nearest, sent.Nearest)
	}
	if got.Offset == nil || *got.Offset != *sent.Offset {
		t.Errorf("Offset = %v, want %d", got.Offset, *sent.Offset)
	}
	got.Nearest, sent.Nearest = nil, nil
	got.Offset, sent.Offset = nil, nil
	if *got != *sent {
		t.Errorf("Decode = %+v, want %+v", got, sent)
	}
}

// What an error carries back is bounded, at a UTF-8 boundary: a status
// travels in HTTP/2 headers, and an echoed 64 MiB path would break the
// connection.
func TestErrorClipped(t *testing.T) {
	long := strings.Repeat("é", 64<<10)
	c := serve(t, &hello{answer: func() (*fsmcpv1.HelloResponse, error) {
		return nil, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, Message: long, Path: long, MissingDirectory: long}
	}})
	_, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{}, grpc.WaitForReady(true))
	got := Decode(err)
	if got.Code != fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Fatalf("Decode = %v, want not_found", err)
	}
	for name, c := range map[string]struct {
		s   string
		max int
	}{"message": {got.Message, maxErrorMessage}, "path": {got.Path, maxErrorPath}, "missing directory": {got.MissingDirectory, maxErrorPath}} {
		if len(c.s) > c.max || len(c.s) < c.max-3 || !strings.HasPrefix(long, c.s) {
			t.Errorf("%s: %d bytes, want a prefix of at most %d", name, len(c.s), c.max)
		}
	}
	if _, err := c.Hello(context.Background(), &fsmcpv1.HelloRequest{}); Decode(err).Code != fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Fatalf("the connection did not survive a long error: %v", err)
	}
}

// A call that failed in the transport decodes to the contract's code for
// how it failed.
func TestDecodeTransportFailures(t *testing.T) {
	for c, want := range map[codes.Code]fsmcpv1.ErrorCode{
		codes.Unavailable:       fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE,
		codes.Canceled:          fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED,
		codes.DeadlineExceeded:  fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT,
		codes.ResourceExhausted: fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE,
		codes.Internal:          fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL,
		codes.Unimplemented:     fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL,
	} {
		if got := Decode(status.Error(c, "/secret/host/path")); got.Code != want || strings.Contains(got.Message, "secret") {
			t.Errorf("Decode(%v) = %v %q, want %v without the status text", c, got.Code, got.Message, want)
		}
	}
	if got := Decode(errors.New("not a status")); got.Code != fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL {
		t.Errorf("Decode(a plain error) = %v, want internal", got.Code)
	}
}

// errors.Is compares codes through wrapping.
func TestErrorIsComparesCodes(t *testing.T) {
	err := fmt.Errorf("op: %w", Errorf(fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, "p", "gone"))
	if !errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) {
		t.Error("errors.Is missed the same code")
	}
	if errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL}) {
		t.Error("errors.Is matched another code")
	}
}

// The system's errors map to the contract's codes, with the errno's text
// and no path.
func TestFSErrorClassifies(t *testing.T) {
	for errno, want := range map[syscall.Errno]fsmcpv1.ErrorCode{
		syscall.ENOENT:    fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND,
		syscall.EEXIST:    fsmcpv1.ErrorCode_ERROR_CODE_ALREADY_EXISTS,
		syscall.ENOTDIR:   fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY,
		syscall.EISDIR:    fsmcpv1.ErrorCode_ERROR_CODE_IS_A_DIRECTORY,
		syscall.ENOTEMPTY: fsmcpv1.ErrorCode_ERROR_CODE_NOT_EMPTY,
		syscall.EROFS:     fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
		syscall.ELOOP:     fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT,
		syscall.ENOSPC:    fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE,
		syscall.EXDEV:     fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED,
		syscall.EMFILE:    fsmcpv1.ErrorCode_ERROR_CODE_UNAVAILABLE,
		syscall.EIO:       fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL,
	} {
		err := &os.PathError{Op: "open", Path: "/host/secret", Err: errno}
		got := FSError("open", "p", err)
		if got.Code != want || got.Path != "p" || got.Message != "open: "+errno.Error() {
			t.Errorf("FSError(%v) = %v %q %q, want %v", errno, got.Code, got.Path, got.Message, want)
		}
	}
	if got := FSError("read", "", context.Canceled); got.Code != fsmcpv1.ErrorCode_ERROR_CODE_CANCELLED {
		t.Errorf("FSError(context.Canceled) = %v", got.Code)
	}
	if got := FSError("read", "", context.DeadlineExceeded); got.Code != fsmcpv1.ErrorCode_ERROR_CODE_TIMEOUT {
		t.Errorf("FSError(context.DeadlineExceeded) = %v", got.Code)
	}
	e := Errorf(fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, "x", "no match")
	if got := FSError("edit", "y", fmt.Errorf("wrapped: %w", e)); got != e {
		t.Errorf("FSError(an *Error) = %v, want it as it is", got)
	}
}

// os.Root's escape error is unexported; IsEscape matches its text. Pin
// that with real escapes, so a Go release that rewords it fails here
// instead of turning outside_root into internal.
func TestIsEscapePinnedToRealEscapes(t *testing.T) {
	base := t.TempDir()
	rootDir := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(rootDir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "outside"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"rel": "../outside", "abs": filepath.Join(base, "outside")} {
		if err := os.Symlink(target, filepath.Join(rootDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"../outside", "rel", "abs", "/etc/passwd", "a/../../outside"} {
		_, err := root.Open(p)
		if err == nil {
			t.Fatalf("Open(%q) escaped the root", p)
		}
		if !IsEscape(err) {
			t.Errorf("IsEscape(Open(%q) error %v) = false", p, err)
		}
		if e := FSError("open", p, err); e.Code != fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT {
			t.Errorf("FSError(Open(%q)) = %v, want outside_root", p, e.Code)
		}
	}
	_, err = root.Open("missing")
	if IsEscape(err) || !errors.Is(FSError("open", "missing", err), &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) {
		t.Errorf("Open(missing) = %v, want not_found and no escape", err)
	}
}
