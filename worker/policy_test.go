package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"google.golang.org/protobuf/proto"
)

const (
	protectedText = "PROTECTED\n"
	deniedText    = "DENIED-CONTENT\n"
)

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// policyFuzzTree is a root with protected files (each holding
// protectedText), a denied file and symlinks that reach both.
func policyFuzzTree(tb testing.TB) (string, *Service) {
	root := tb.TempDir()
	for p, content := range map[string]string{
		".git/config": protectedText, ".git/hooks/pre-commit": protectedText, "sub/.git/config": protectedText,
		".vscode/tasks.json": protectedText, ".envrc": protectedText, "secret.key": deniedText,
		"d/secret.key": deniedText, "d/f": "inside\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for name, target := range map[string]string{"g": ".git", "k": "secret.key", "d/up": "..", "h": ".git/hooks"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			tb.Fatal(err)
		}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	rg, err := exec.LookPath("rg")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := New(r, Options{MaxRead: 1 << 16, RG: rg,
		Policy: sandbox.Policy{Protect: sandbox.DefaultProtect, Deny: []string{"*.key"}}})
	if err != nil {
		tb.Fatal(err)
	}
	return root, s
}

// protectedSnapshot describes every name, mode and content beneath the
// protected directories and of the protected files.
func protectedSnapshot(tb testing.TB, root string) string {
	var b strings.Builder
	for _, top := range []string{".git", "sub/.git", ".vscode", ".envrc"} {
		filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				b.WriteString(p + " " + err.Error() + "; ")
				return nil
			}
			fi, _ := d.Info()
			b.WriteString(p + " " + fi.Mode().String())
			if fi.Mode().IsRegular() {
				data, _ := os.ReadFile(p)
				b.WriteString(" " + string(data))
			}
			b.WriteString("; ")
			return nil
		})
	}
	return b.String()
}

// FuzzPolicy sends arbitrary path pairs to every RPC of a worker with the
// default protected set and a deny rule. However a path is spelled, no
// protected file or directory changes (every precondition a mutation asks
// for is met: the protected files' sha256 is known), and no reply carries
// denied content or its hash.
func FuzzPolicy(f *testing.F) {
	root, s := policyFuzzTree(f)
	c := serveInProcess(f, s)
	before := protectedSnapshot(f, root)
	for _, seed := range [][2]string{
		{".git/config", "x"}, {"g/config", "x"}, {"h/pre-commit", "x"}, {"d/up/.git/config", "d/f"},
		{"sub/.git/config", "sub/x"}, {"d/f", ".git/hooks/post-commit"}, {"d", "sub/.git"}, {"sub", "sub2"},
		{"k", "x"}, {"secret.key", "public"}, {"d/up/d/secret.key", "d/f2"}, {".vscode", "v"}, {"d/../.envrc", "e"},
		{"/.git//hooks/./pre-commit", "x"}, {"d", ".vscode/d"}, {".git/x", "y"},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, p, q []byte) {
		ctx := context.Background()
		var replies []proto.Message
		one := func(m proto.Message, _ error) { replies = append(replies, m) }
		many := func(ms []proto.Message, _ error) { replies = append(replies, ms...) }
		sum := hexSHA(protectedText)
		one(c.Stat(ctx, &fsmcpv1.StatRequest{Path: p}))
		one(c.Read(ctx, &fsmcpv1.ReadRequest{Path: p, Length: 1 << 16}))
		many(workertest.Drain(c.Grep(ctx, &fsmcpv1.GrepRequest{Pattern: "DENIED", Path: p, Hidden: true, NoIgnore: true, MaxBytes: 1 << 16})))
		one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("PWNED"), IfSha256: sum}))
		one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("PWNED"), MustNotExist: true}))
		one(c.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: p, IfSha256: sum,
			Edits: []*fsmcpv1.Edit{{Old: []byte("PROTECTED"), New: []byte("PWNED")}}}))
		one(c.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: p}))
		one(c.Move(ctx, &fsmcpv1.MoveRequest{From: p, To: q}))
		one(c.Move(ctx, &fsmcpv1.MoveRequest{From: q, To: p}))
		one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, Recursive: true}))
		for _, r := range replies {
			b, _ := proto.Marshal(r)
			if bytes.Contains(b, []byte("DENIED-CONTENT")) || bytes.Contains(b, []byte(hexSHA(deniedText))) {
				t.Fatalf("paths %q, %q: a reply carries denied content: %q", p, q, b)
			}
		}
		if after := protectedSnapshot(t, root); after != before {
			t.Fatalf("paths %q, %q changed what is protected:\nbefore %s\nafter  %s", p, q, before, after)
		}
	})
}

// TestPolicySweepSeesLinks: the start-up walk shows the policy every
// protected file with another name, so the other name is refused even if
// no call met the protected one.
func TestPolicySweepSeesLinks(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "deep", "sub", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, "deep", "sub", ".git", "config")
	if err := os.WriteFile(cfg, []byte(protectedText), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(cfg, filepath.Join(root, "twin")); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := New(r, Options{Policy: sandbox.Policy{Protect: sandbox.DefaultProtect}})
	if err != nil {
		t.Fatal(err)
	}
	d, _, unlock, err := s.openMutationPath(context.Background(), "write", "twin", accessRewrite)
	if err != nil {
		t.Fatalf("before the walk, the twin is judged by its own name: %v", err)
	}
	d.close()
	unlock()
	if _, err := s.sweep(time.Now(), false); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = s.openMutationPath(context.Background(), "write", "twin", accessRewrite)
	var e *Error
	if !errors.As(err, &e) || !e.PolicyViolation || !strings.Contains(e.Message, "deep/sub/.git/config") {
		t.Fatalf("after the walk, openMutation(twin) = %v, want a policy refusal naming the protected file", err)
	}
	if _, err := os.Stat(filepath.Join(root, "twin")); err != nil {
		t.Fatalf("a walk that only looks removed something: %v", err)
	}
}
