package workertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsmcp/fsmcp/proto/callstream"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"google.golang.org/protobuf/proto"
)

// Secret is the content of the file outside the root that no RPC may read,
// change or name.
const Secret = "OUTSIDE-THE-ROOT"

// Serve starts a worker over root and returns a client to it. The suite
// calls it once per row, with a fresh tree. A worker served with a
// quarantine keeps it in QuarantineDir(root), outside the root and apart
// from the outside tree the suite watches.
type Serve func(t *testing.T, root string) fsmcpv1.WorkerServiceClient

// Layout is the tree of one row, in a small language: "d/" is a directory,
// "f" a file holding "inside", "a => b" a symlink a with target b, where
// $OUT in b is replaced by the host path of the outside directory.
type Layout []string

// row is one escape attempt: a tree and the path that must not lead out.
type row struct {
	name   string
	layout Layout
	path   string
}

var rows = []row{
	{"dotdot", Layout{"f"}, "../outside/secret"},
	{"dotdot inside a path", Layout{"d/", "f"}, "d/../../outside/secret"},
	{"relative symlink out", Layout{"link => ../outside/secret"}, "link"},
	{"absolute symlink out", Layout{"abs => $OUT/secret"}, "abs"},
	{"symlinked parent out", Layout{"dir => ../outside"}, "dir/secret"},
	{"symlinked parent, deeper", Layout{"d/", "d/up => ../../outside"}, "d/up/secret"},
	{"chain out", Layout{"a => b", "b => ../outside/secret"}, "a"},
	{"absolute path", Layout{"f"}, "//$OUT/secret"},
	{"dotdot to the outside dir", Layout{"d/"}, "d/../../outside"},
}

// RunAll runs every row against every RPC, each as its own RPC and, for
// the small calls the front-end sends on the worker's Calls stream,
// through that stream (callstream.Client).
func RunAll(t *testing.T, serve Serve) {
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) { runRow(t, r, serve) })
		t.Run(r.name+" via the call stream", func(t *testing.T) {
			runRow(t, r, func(t *testing.T, root string) fsmcpv1.WorkerServiceClient {
				c := callstream.New(serve(t, root))
				t.Cleanup(c.Close)
				return c
			})
		})
	}
}

func runRow(t *testing.T, r row, serve Serve) {
	base := t.TempDir()
	root, out := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, filepath.Join(out, "sub"), QuarantineDir(root)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "secret"), []byte(Secret), 0o644); err != nil {
		t.Fatal(err)
	}
	build(t, root, out, r.layout)
	if err := os.MkdirAll(filepath.Dir(RulesFile(root)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(RulesFile(root), []byte(rulesText), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, out)
	c := serve(t, root)
	p := []byte(strings.ReplaceAll(r.path, "$OUT", strings.TrimPrefix(out, "/")))
	// A refusal may echo the client's own path; only a host path
	// the client did not send is a leak.
	hostPath := []byte(base)
	if bytes.Contains(p, hostPath[1:]) {
		hostPath = []byte(Secret)
	}
	for _, call := range calls(p) {
		msgs, err := call.do(context.Background(), c)
		for _, m := range msgs {
			b, _ := proto.Marshal(m)
			if bytes.Contains(b, []byte(Secret)) || bytes.Contains(b, hostPath) {
				t.Fatalf("%s(%q) leaked the outside: %q", call.name, p, b)
			}
		}
		if err != nil && (strings.Contains(err.Error(), Secret) || strings.Contains(err.Error(), string(hostPath))) {
			t.Fatalf("%s(%q) error leaked the outside: %v", call.name, p, err)
		}
		if call.mustFail && err == nil {
			t.Errorf("%s(%q) succeeded, want a refusal", call.name, p)
		}
		if after := snapshot(t, out); after != before {
			t.Fatalf("%s(%q) changed the outside tree:\nbefore %s\nafter  %s", call.name, p, before, after)
		}
	}
}

func build(t *testing.T, root, out string, layout Layout) {
	for _, e := range layout {
		var err error
		switch name, target, link := strings.Cut(e, " => "); {
		case link:
			err = os.Symlink(strings.ReplaceAll(target, "$OUT", out), filepath.Join(root, name))
		case strings.HasSuffix(e, "/"):
			err = os.MkdirAll(filepath.Join(root, e), 0o755)
		default:
			err = os.WriteFile(filepath.Join(root, e), []byte("inside"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot describes every name, type, mode and content under dir.
func snapshot(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" " + string(data))
		}
		b.WriteString("; ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

type call struct {
	name string
	// mustFail: the RPC reads or writes through the path, so it must be
	// refused. Others (lstat, deleting or moving a symlink itself) may
	// succeed, as long as nothing outside changes.
	mustFail bool
	do       func(context.Context, fsmcpv1.WorkerServiceClient) ([]proto.Message, error)
}

func calls(p []byte) []call {
	sum := sha256.Sum256([]byte(Secret))
	secretSHA := hex.EncodeToString(sum[:])
	one := func(m proto.Message, err error) ([]proto.Message, error) { return []proto.Message{m}, err }
	return []call{
		{"Stat", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Stat(ctx, &fsmcpv1.StatRequest{Path: p}))
		}},
		{"StatStream", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return Drain(c.StatStream(ctx, &fsmcpv1.StatStreamRequest{Stat: &fsmcpv1.StatRequest{Path: p}}))
		}},
		{"Read", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Read(ctx, &fsmcpv1.ReadRequest{Path: p, Length: 1 << 16}))
		}},
		{"List", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.List(ctx, &fsmcpv1.ListRequest{Path: p, MaxBytes: 1 << 16}))
		}},
		{"List sorted by size, with totals", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.List(ctx, &fsmcpv1.ListRequest{Path: p, MaxBytes: 1 << 16, Sort: fsmcpv1.ListingSort_LISTING_SORT_SIZE, Totals: true}))
		}},
		{"Glob", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return Drain(c.Glob(ctx, &fsmcpv1.GlobRequest{Pattern: "*", Path: p, Hidden: true, NoIgnore: true, MaxBytes: 1 << 16}))
		}},
		{"ReadMany", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			// The call succeeds; the one read's own error is the refusal.
			m, err := c.ReadMany(ctx, &fsmcpv1.ReadManyRequest{Reads: []*fsmcpv1.ReadRequest{{Path: p, Length: 1 << 16}}})
			if e := m.GetResults(); err == nil && len(e) == 1 && e[0].GetError() != nil {
				err = errors.New(e[0].GetError().GetMessage())
			}
			return []proto.Message{m}, err
		}},
		{"View", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.View(ctx, &fsmcpv1.ViewRequest{Path: p}))
		}},
		{"Tree", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return Drain(c.Tree(ctx, &fsmcpv1.TreeRequest{Path: p, MaxDepth: 16, Hidden: true, NoIgnore: true, MaxBytes: 1 << 16}))
		}},
		{"Grep", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return Drain(c.Grep(ctx, &fsmcpv1.GrepRequest{Pattern: "OUTSIDE", Path: p, Hidden: true, NoIgnore: true, MaxBytes: 1 << 16}))
		}},
		{"Write", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("pwned"), IfSha256: secretSHA}))
		}},
		{"Write create", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: append(p, "/planted"...), Content: []byte("pwned"), MustNotExist: true}))
		}},
		{"Write append", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("pwned"), IfSha256: secretSHA, Append: true}))
		}},
		{"Write dry run", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("pwned"), IfSha256: secretSHA, DryRun: true}))
		}},
		{"Splice", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Splice(ctx, &fsmcpv1.SpliceRequest{Path: p, Offset: 0, Delete: 3, Insert: []byte("pwned"), IfSha256: secretSHA}))
		}},
		{"Splice dry run", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Splice(ctx, &fsmcpv1.SpliceRequest{Path: p, Offset: 0, Delete: 3, IfSha256: secretSHA, DryRun: true}))
		}},
		{"Splice create", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Splice(ctx, &fsmcpv1.SpliceRequest{Path: append(p, "/planted"...), Insert: []byte("pwned"), MustNotExist: true}))
		}},
		{"Replace", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: p, IfSha256: secretSHA,
				Edits: []*fsmcpv1.Edit{{Old: []byte("OUTSIDE"), New: []byte("PWNED")}}}))
		}},
		{"Copy out", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Copy(ctx, &fsmcpv1.CopyRequest{From: p, To: []byte("copied"), Recursive: true}))
		}},
		{"Copy in", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Copy(ctx, &fsmcpv1.CopyRequest{From: []byte("f"), To: append(p, "/planted"...)}))
		}},
		{"Digest", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return Drain(c.Digest(ctx, &fsmcpv1.DigestRequest{Path: append(p, "/sub"...)}))
		}},
		{"Patch", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			diff := "--- a/" + string(p) + "\n+++ b/" + string(p) + "\n@@ -1 +1 @@\n-" + Secret + "\n+pwned\n"
			return one(c.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(diff),
				Preconditions: []*fsmcpv1.PatchPrecondition{{Path: p, Sha256: secretSHA}}}))
		}},
		{"Patch dry run", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			diff := "--- a/" + string(p) + "\n+++ b/" + string(p) + "\n@@ -1 +1 @@\n-" + Secret + "\n+pwned\n"
			return one(c.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(diff), DryRun: true,
				Preconditions: []*fsmcpv1.PatchPrecondition{{Path: p, Sha256: secretSHA}}}))
		}},
		{"Patch create", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			q := string(p) + "/planted"
			diff := "--- /dev/null\n+++ b/" + q + "\n@@ -0,0 +1 @@\n+pwned\n"
			return one(c.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(diff),
				Preconditions: []*fsmcpv1.PatchPrecondition{{Path: []byte(q), MustNotExist: true}}}))
		}},
		{"Mkdir", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: append(p, "/planted"...)}))
		}},
		{"Move into", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Move(ctx, &fsmcpv1.MoveRequest{From: []byte("f"), To: append(p, "/planted"...)}))
		}},
		{"Delete inside", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: append(p, "/sub"...), Recursive: true}))
		}},
		{"Delete guarded", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: append(p, "/sub"...), Recursive: true, IfTreeSha256: secretSHA}))
		}},
		// Check resolves the path, and must name only what is inside.
		{"Check", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Check(ctx, &fsmcpv1.CheckRequest{Tool: "fs_read", Paths: [][]byte{p, append(p, "/planted"...)}}))
		}},
		// An undo token is opaque: one spelled as a path names nothing.
		{"Undo", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Undo(ctx, &fsmcpv1.UndoRequest{Token: string(p)}))
		}},
		// A checkpoint's label is opaque; a rewind limited to the path
		// must resolve it inside, and a dry run must show nothing of
		// the outside. Without checkpoints (no quarantine or state
		// directory) both are unsupported.
		{"Rewind", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			cp, err := c.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{Label: string(p)})
			id := cp.GetCheckpoint().GetId()
			if err != nil {
				id = "0000000000000000"
			}
			rw, err := c.Rewind(ctx, &fsmcpv1.RewindRequest{Id: id, Path: p, Force: true})
			return []proto.Message{cp, rw}, err
		}},
		{"Rewind dry run", true, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			cp, err := c.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{})
			id := cp.GetCheckpoint().GetId()
			if err != nil {
				id = "0000000000000000"
			}
			rw, err := c.Rewind(ctx, &fsmcpv1.RewindRequest{Id: id, Path: p, DryRun: true})
			return []proto.Message{cp, rw}, err
		}},
		{"Checkpoints", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Checkpoints(ctx, &fsmcpv1.CheckpointsRequest{}))
		}},
		// Last, as they may remove or move the symlink itself.
		{"Move", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Move(ctx, &fsmcpv1.MoveRequest{From: p, To: []byte("moved")}))
		}},
		{"Digest of the path", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return Drain(c.Digest(ctx, &fsmcpv1.DigestRequest{Path: p}))
		}},
		{"Move guarded", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Move(ctx, &fsmcpv1.MoveRequest{From: p, To: []byte("moved2"), IfSha256: secretSHA}))
		}},
		{"Delete guarded path", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, IfSha256: secretSHA}))
		}},
		{"Delete", false, func(ctx context.Context, c fsmcpv1.WorkerServiceClient) ([]proto.Message, error) {
			return one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, Recursive: true}))
		}},
	}
}

// Drain collects every message of a server stream.
func Drain[T proto.Message](stream interface{ Recv() (T, error) }, err error) ([]proto.Message, error) {
	if err != nil {
		return nil, err
	}
	var msgs []proto.Message
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

// QuarantineDir is where a Serve function keeps the worker's quarantine
// for root; the suite creates it.
func QuarantineDir(root string) string { return filepath.Join(filepath.Dir(root), "quarantine") }

// RulesFile is a --rules file for root that a Serve function may give the
// worker, so that Check resolves every path; the suite writes it.
func RulesFile(root string) string { return filepath.Join(filepath.Dir(root), "rules", "rules") }

// rulesText asks about everything: every path is judged.
const rulesText = "ask * **\n"
