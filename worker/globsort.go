package worker

import (
	"github.com/fsmcp/fsmcp/worker/internal/paging"
)

// mtimeKey returns the sort key of the root-relative path p, lstat'ed
// through the Root, or false if p is gone.
func (s *Service) mtimeKey(p []byte) ([]byte, bool) {
	st, err := s.lstat(string(p))
	if err != nil {
		return nil, false
	}
	return paging.MtimeKey(st.Mtim.Nano(), p), true
}
