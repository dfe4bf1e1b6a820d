package selftest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Unconfined, every probe the kernel allows is reported as allowed, and
// with no layer enforced that is no failure; a layer said to be enforced
// whose probe is allowed fails the self-test, naming the probe.
func TestRunUnconfined(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	// A program that exits at once: the probe's own arguments mean
	// nothing to it.
	exe, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to exec")
	}
	c := Config{Outside: t.TempDir(), Exe: exe, DevNull: devNull}
	probes, err := Run(c)
	if err != nil || len(probes) != 4 {
		t.Fatalf("Run(nothing enforced) = %d probes, %v", len(probes), err)
	}
	if p := probes[0]; p.Name != probeOpen || p.Result != "allowed" || p.Refused {
		t.Errorf("first probe %v, want an allowed open", p)
	}
	c.FSEnforced = true
	if _, err := Run(c); err == nil || !strings.Contains(err.Error(), probeOpen+": allowed") {
		t.Errorf("Run(filesystem enforced, unconfined) = %v, want a failure naming %q", err, probeOpen)
	}
	if got := OutsidePath("/"); got != "" {
		t.Errorf("OutsidePath(/) = %q, want none", got)
	}
}
