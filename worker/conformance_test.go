package worker

import (
	"os"
	"os/exec"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"github.com/fsmcp/fsmcp/worker/workertest"
)

// The escape table against a worker served in this process over a real
// socketpair, with no Landlock and no seccomp: os.Root alone must hold.
func TestConformanceInProcess(t *testing.T) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Fatal(err)
	}
	workertest.RunAll(t, func(t *testing.T, dir string) fsmcpv1.WorkerServiceClient {
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { devNull.Close() })
		qf, err := os.Open(workertest.QuarantineDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qf.Close() })
		q, err := OpenQuarantine(qf, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := rulesfile.Open(workertest.RulesFile(dir))
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(root, Options{RG: rg, DevNull: devNull, MaxRead: 1 << 16, Quarantine: q, Rules: rules, State: stateFor(t, dir)})
		if err != nil {
			t.Fatal(err)
		}
		return serveInProcess(t, s)
	})
}
