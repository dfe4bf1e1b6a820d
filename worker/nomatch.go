package worker

import (
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/nomatch"
)

// noMatch is the no_match error for text missing from data, with the
// nearest candidate when there is one, described in the message too.
func noMatch(p string, data, text []byte, format string, args ...any) *Error {
	e := newError(fsmcpv1.ErrorCode_ERROR_CODE_NO_MATCH, p, format, args...)
	if n := nomatch.Find(data, text); n != nil {
		e.Nearest = n
		e.Message += nomatch.Describe(n)
	}
	return e
}
