package rgproc

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func rgCmd(t *testing.T, args ...string) Cmd {
	t.Helper()
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("rg not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("hit\nmiss\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return Cmd{Path: rg, Args: args, Dir: d, Tick: func() error { return nil }, Every: time.Millisecond}
}

// rg runs in Dir, its output is consumed and its exit status returned;
// its stderr lines are counted; a failing Consume is returned as such.
func TestRun(t *testing.T) {
	var out []byte
	c := rgCmd(t, "--no-config", "hit", ".")
	c.Consume = func(r io.Reader) (err error) { out, err = io.ReadAll(r); return err }
	res, err := Run(context.Background(), c)
	if err != nil || res.Exit != 0 || string(out) != "./f:hit\n" && string(out) != "f:hit\n" {
		t.Fatalf("Run(hit) = %+v, %v, output %q", res, err, out)
	}
	c = rgCmd(t, "--no-config", "nothing", "missing-dir")
	c.Consume = func(r io.Reader) error { _, err := io.ReadAll(r); return err }
	if res, err := Run(context.Background(), c); err != nil || res.Exit != 2 || res.StderrLines != 1 {
		t.Fatalf("Run(missing) = %+v, %v, want exit 2 and one stderr line", res, err)
	}
	c = rgCmd(t, "--no-config", "hit", ".")
	boom := errors.New("boom")
	c.Consume = func(io.Reader) error { return boom }
	var ce *ConsumeError
	if _, err := Run(context.Background(), c); !errors.As(err, &ce) || !errors.Is(ce.Err, boom) {
		t.Fatalf("Run(failing consume) = %v, want a ConsumeError", err)
	}
}

// A context that ends kills rg: Run returns the context's error once rg
// is reaped, however long rg would have run.
func TestRunKilledWhenContextEnds(t *testing.T) {
	c := rgCmd(t, "--no-config", "x", "-") // searches stdin: a pipe never closed
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	c.Stdin = r
	c.Consume = func(r io.Reader) error { _, err := io.ReadAll(r); return err }
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run(endless) = %v, want %v", err, context.DeadlineExceeded)
	}
}
