package frontend

import (
	"testing"

	"github.com/fsmcp/fsmcp/worker"
)

// The front-end does not link the worker, so it spells the metadata keys
// of a call under --rules itself: they must be the worker's.
func TestRulesMetadataKeys(t *testing.T) {
	if toolMetadata != worker.ToolMetadata || judgedMetadata != worker.JudgedMetadata {
		t.Fatalf("front-end keys %q, %q; worker %q, %q", toolMetadata, judgedMetadata, worker.ToolMetadata, worker.JudgedMetadata)
	}
}
