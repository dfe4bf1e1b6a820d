package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

// BenchmarkPolicyResolve prices the resolver against what the RPCs did
// before it, in one run: lstat of a name five levels deep by os.Root
// alone, and the same through statName (which also asks the kernel the
// opened parent's name); opening the parent of a name to mutate by
// os.Root alone, and through openMutationPath (which also names it and
// judges it against the default protected set); and the matching alone.
// Each also reports cpu-ns/op, the process's CPU time per call, which a
// machine shared with other work disturbs far less than wall time.
func BenchmarkPolicyResolve(b *testing.B) {
	root := b.TempDir()
	dir := filepath.Join(root, "a", "b", "c", "d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file.go"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	s, err := New(r, Options{Policy: sandbox.Policy{Protect: sandbox.DefaultProtect}})
	if err != nil {
		b.Fatal(err)
	}
	const p = "a/b/c/d/file.go"
	run := func(name string, op func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			before := cpuTime(b)
			for b.Loop() {
				op(b)
			}
			b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
		})
	}
	run("lstat/os.Root", func(b *testing.B) {
		if _, err := s.root.Lstat(p); err != nil {
			b.Fatal(err)
		}
	})
	run("lstat/statName", func(b *testing.B) {
		if _, err := s.statName(context.Background(), "lstat", []byte(p)); err != nil {
			b.Fatal(err)
		}
	})
	run("parent/os.Root", func(b *testing.B) {
		f, err := s.root.OpenFile("a/b/c/d", os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			b.Fatal(err)
		}
		var st unix.Stat_t
		unix.Fstat(int(f.Fd()), &st)
		f.Close()
	})
	run("parent/openMutation", func(b *testing.B) {
		d, _, unlock, err := s.openMutationPath(context.Background(), "write", p, accessRewrite)
		if err != nil {
			b.Fatal(err)
		}
		d.close()
		unlock()
	})
	run("match/defaults", func(b *testing.B) {
		if _, ok := s.policy.Protected(p); ok {
			b.Fatal("protected")
		}
	})
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
