package worker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/protobuf/proto"
)

const canaryText = "CANARY-outside-the-root"

// fuzzTree builds base/root, served, and base/canary beside it, which no
// request may read, name or change. Symlinks inside the root point both
// ways.
func fuzzTree(f *testing.F) (base string, s *Service, canary map[string][]byte) {
	base = f.TempDir()
	root := filepath.Join(base, "root")
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "d", "e"), 0o755))
	must(os.MkdirAll(filepath.Join(base, "canary", "sub"), 0o755))
	canary = map[string][]byte{
		filepath.Join(base, "canary", "secret"):     []byte(canaryText + " secret\n"),
		filepath.Join(base, "canary", "sub", "key"): []byte(canaryText + " key\n"),
	}
	for p, b := range canary {
		must(os.WriteFile(p, b, 0o600))
	}
	must(os.WriteFile(filepath.Join(root, "f"), []byte("inside\n"), 0o644))
	for name, target := range map[string]string{
		"in": "f", "out": "../canary/secret", "dirout": "../canary", "abs": filepath.Join(base, "canary", "secret"),
		"d/up": "../f", "d/e/upup": "../../../canary", "loop": "loop",
	} {
		must(os.Symlink(target, filepath.Join(root, name)))
	}
	r, err := os.OpenRoot(root)
	must(err)
	f.Cleanup(func() { r.Close() })
	s, err = New(r, Options{MaxRead: 1 << 16})
	must(err)
	return base, s, canary
}

// FuzzPaths sends arbitrary paths to every read RPC. Whatever is accepted
// or refused, no reply carries canary bytes or the host location of the
// tree, and the canary files stay as they were.
func FuzzPaths(f *testing.F) {
	base, s, canary := fuzzTree(f)
	for _, seed := range []string{"", ".", "/", "f", "in", "out", "dirout/secret", "abs", "d/up", "d/e/upup/secret",
		"..", "../canary/secret", "d/../../canary/secret", "/etc/passwd", "//etc/passwd", "loop", "d/e/../../f",
		"f/", "d//e", "./././f", "\x00", "d/\xff", base + "/canary/secret"} {
		f.Add([]byte(seed))
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, p []byte) {
		var replies []proto.Message
		var errs []error
		st, err := s.Stat(ctx, &fsmcpv1.StatRequest{Path: p})
		replies, errs = append(replies, st), append(errs, err)
		ls, err := s.List(ctx, &fsmcpv1.ListRequest{Path: p, MaxBytes: 1 << 16})
		replies, errs = append(replies, ls), append(errs, err)
		rd, err := s.Read(ctx, &fsmcpv1.ReadRequest{Path: p, Length: 1 << 16})
		replies, errs = append(replies, rd), append(errs, err)
		for _, r := range replies {
			b, _ := proto.Marshal(r)
			if bytes.Contains(b, []byte(canaryText)) || bytes.Contains(b, []byte(base)) {
				t.Fatalf("path %q: reply leaks the outside: %q", p, b)
			}
		}
		for _, err := range errs {
			if err != nil && (bytes.Contains([]byte(err.Error()), []byte(base)) || bytes.Contains([]byte(err.Error()), []byte(canaryText))) {
				t.Fatalf("path %q: error leaks the outside: %v", p, err)
			}
		}
		for path, want := range canary {
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("path %q: canary %s changed", p, path)
			}
		}
	})
}
