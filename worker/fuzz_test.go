package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fsmcp/fsmcp/proto/callstream"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

const canaryText = "CANARY-outside-the-root"

// canarySHA is the sha256 of the canary secret, so that a precondition an
// escaping call checked would hold.
var canarySHA = func() string {
	sum := sha256.Sum256([]byte(canaryText + " secret\n"))
	return hex.EncodeToString(sum[:])
}()

// fuzzTree builds base/root, served, and base/canary beside it, which no
// request may read, name or change. Symlinks inside the root point both
// ways.
func fuzzTree(f testing.TB) (base string, s *Service, canary map[string][]byte) {
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
	devNull, err := os.Open(os.DevNull)
	must(err)
	f.Cleanup(func() { devNull.Close() })
	rg, err := exec.LookPath("rg")
	must(err)
	// Deletes and writes go through the quarantine, beside the root and
	// apart from the canary; Undo is fuzzed with the same bytes.
	must(os.Mkdir(filepath.Join(base, "quarantine"), 0o755))
	qf, err := os.Open(filepath.Join(base, "quarantine"))
	must(err)
	f.Cleanup(func() { qf.Close() })
	q, err := OpenQuarantine(qf, 1<<20)
	must(err)
	// Check resolves every fuzzed path against a rule that matches all.
	must(os.WriteFile(filepath.Join(base, "rules"), []byte("ask * **\n"), 0o644))
	rules, err := rulesfile.Open(filepath.Join(base, "rules"))
	must(err)
	s, err = New(r, Options{MaxRead: 1 << 16, RG: rg, DevNull: devNull, Quarantine: q, Rules: rules, State: stateFor(f, root)})
	must(err)
	return base, s, canary
}

// serveInProcess serves s over a real socketpair and returns a client;
// opts are added to the client's.
func serveInProcess(tb testing.TB, s *Service, opts ...grpc.DialOption) fsmcpv1.WorkerServiceClient {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	mine, _ := net.FileConn(os.NewFile(uintptr(fds[0]), "client"))
	theirs, _ := net.FileConn(os.NewFile(uintptr(fds[1]), "server"))
	go Serve(theirs, s, nil)
	cc, err := grpc.NewClient("passthrough:///worker", append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return mine, nil }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(link.MaxMessageBytes))}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return fsmcpv1.NewWorkerServiceClient(cc)
}

// FuzzPaths sends arbitrary paths to every RPC, through a real gRPC
// connection and, for searches, a real rg (without Landlock: this is the
// os.Root layer on its own). Whatever is accepted or refused, no reply
// carries canary bytes or the host location of the tree, and the canary
// files stay as they were. Mutations act on the fuzzed path inside the
// root, which is the point: they must never reach outside it.
func FuzzPaths(f *testing.F) {
	base, s, canary := fuzzTree(f)
	clients := fuzzClients(f, serveInProcess(f, s))
	for _, seed := range []string{"", ".", "/", "f", "in", "out", "dirout/secret", "abs", "d/up", "d/e/upup/secret",
		"..", "../canary/secret", "d/../../canary/secret", "/etc/passwd", "//etc/passwd", "loop", "d/e/../../f",
		"f/", "d//e", "./././f", "\x00", "d/\xff", base + "/canary/secret"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		for _, c := range clients {
			fuzzPath(t, c, p, base, canary)
		}
	})
}

// fuzzClients are the ways FuzzPaths sends: every call as its own RPC,
// and the small calls on the Calls stream, as the front-end sends them.
func fuzzClients(tb testing.TB, c fsmcpv1.WorkerServiceClient) []fsmcpv1.WorkerServiceClient {
	cs := callstream.New(c)
	tb.Cleanup(cs.Close)
	return []fsmcpv1.WorkerServiceClient{c, cs}
}

// fuzzPath is one input of FuzzPaths: p sent to every RPC.
func fuzzPath(t *testing.T, c fsmcpv1.WorkerServiceClient, p []byte, base string, canary map[string][]byte) {
	ctx := context.Background()
	var replies []proto.Message
	var errs []error
	one := func(m proto.Message, err error) {
		replies, errs = append(replies, m), append(errs, err)
	}
	many := func(ms []proto.Message, err error) {
		replies, errs = append(replies, ms...), append(errs, err)
	}
	one(c.Stat(ctx, &fsmcpv1.StatRequest{Path: p}))
	many(workertest.Drain(c.StatStream(ctx, &fsmcpv1.StatStreamRequest{Stat: &fsmcpv1.StatRequest{Path: p}})))
	one(c.List(ctx, &fsmcpv1.ListRequest{Path: p, MaxBytes: 1 << 16}))
	// Sorted by mtime with totals, continuing after the fuzzed bytes as a
	// cursor's name: each entry is lstat'ed, and the position is any.
	one(c.List(ctx, &fsmcpv1.ListRequest{Path: p, MaxBytes: 1 << 16, Sort: fsmcpv1.ListingSort_LISTING_SORT_MTIME,
		Totals: true, After: p, AfterKey: int64(len(p)) << 40, HasAfter: len(p) > 0}))
	one(c.Read(ctx, &fsmcpv1.ReadRequest{Path: p, Length: 1 << 16}))
	many(workertest.Drain(c.Glob(ctx, &fsmcpv1.GlobRequest{Pattern: "*", Path: p, Hidden: true, NoIgnore: true, MaxBytes: 1 << 16})))
	one(c.View(ctx, &fsmcpv1.ViewRequest{Path: p}))
	one(c.ReadMany(ctx, &fsmcpv1.ReadManyRequest{Reads: []*fsmcpv1.ReadRequest{{Path: p, Length: 1 << 16}, {Path: []byte("f"), Length: 16}}}))
	// Two levels: deeper, a tree shows the directories Mkdir below builds
	// inside the root from seeds that spell the host path of the tree
	// (tmp/FuzzPaths…/001/canary), names that are inside, not a leak.
	many(workertest.Drain(c.Tree(ctx, &fsmcpv1.TreeRequest{Path: p, MaxDepth: 2, Hidden: true, NoIgnore: true, MaxBytes: 1 << 16})))
	many(workertest.Drain(c.Grep(ctx, &fsmcpv1.GrepRequest{Pattern: "CANARY|inside", Path: p, Hidden: true, NoIgnore: true, MaxBytes: 1 << 16})))
	one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("fuzz"), MustNotExist: true}))
	one(c.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: p, IfSha256: "0000000000000000000000000000000000000000000000000000000000000000",
		Edits: []*fsmcpv1.Edit{{Old: []byte("CANARY"), New: []byte("x")}}}))
	one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("fuzz"), IfSha256: canarySHA, Append: true}))
	one(c.Write(ctx, &fsmcpv1.WriteRequest{Path: p, Content: []byte("fuzz"), IfSha256: canarySHA, DryRun: true}))
	one(c.Splice(ctx, &fsmcpv1.SpliceRequest{Path: p, Offset: 1, Delete: 2, Insert: []byte("fuzz"), IfSha256: canarySHA}))
	one(c.Splice(ctx, &fsmcpv1.SpliceRequest{Path: p, Insert: []byte("fuzz"), MustNotExist: true, DryRun: true}))
	one(c.Copy(ctx, &fsmcpv1.CopyRequest{From: p, To: []byte("copied"), Recursive: true}))
	one(c.Copy(ctx, &fsmcpv1.CopyRequest{From: []byte("f"), To: p}))
	many(workertest.Drain(c.Digest(ctx, &fsmcpv1.DigestRequest{Path: p})))
	diff := "--- a/" + string(p) + "\n+++ b/" + string(p) + "\n@@ -1 +1 @@\n-" + canaryText + " secret\n+fuzz\n"
	one(c.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte(diff), Preconditions: []*fsmcpv1.PatchPrecondition{{Path: p, Sha256: canarySHA}}}))
	one(c.Patch(ctx, &fsmcpv1.PatchRequest{Patch: []byte("--- /dev/null\n+++ b/" + string(p) + "\n@@ -0,0 +1 @@\n+fuzz\n"),
		Preconditions: []*fsmcpv1.PatchPrecondition{{Path: p, MustNotExist: true}}, DryRun: true}))
	one(c.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: p}))
	one(c.Move(ctx, &fsmcpv1.MoveRequest{From: p, To: []byte("moved")}))
	one(c.Move(ctx, &fsmcpv1.MoveRequest{From: []byte("moved"), To: p}))
	one(c.Move(ctx, &fsmcpv1.MoveRequest{From: p, To: []byte("moved"), IfSha256: canarySHA}))
	one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, IfSha256: canarySHA}))
	one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, Recursive: true, IfTreeSha256: canarySHA}))
	one(c.Delete(ctx, &fsmcpv1.DeleteRequest{Path: p, Recursive: true}))
	one(c.Undo(ctx, &fsmcpv1.UndoRequest{Token: string(p)}))
	cp, err := c.Checkpoint(ctx, &fsmcpv1.CheckpointRequest{Label: string(p)})
	one(cp, err)
	one(c.Rewind(ctx, &fsmcpv1.RewindRequest{Id: cp.GetCheckpoint().GetId(), Path: p, Keep: [][]byte{p}, DryRun: true}))
	one(c.Rewind(ctx, &fsmcpv1.RewindRequest{Id: string(p), Path: p, Force: true}))
	one(c.Checkpoints(ctx, &fsmcpv1.CheckpointsRequest{}))
	one(c.Check(ctx, &fsmcpv1.CheckRequest{Tool: "fs_read", Paths: [][]byte{p}}))
	for _, r := range replies {
		b, _ := proto.Marshal(r)
		if bytes.Contains(b, []byte(canaryText)) || bytes.Contains(b, []byte(base)) {
			t.Fatalf("path %q: reply leaks the outside: %q", p, b)
		}
	}
	for _, err := range errs {
		if err != nil && (strings.Contains(err.Error(), base) || strings.Contains(err.Error(), canaryText)) {
			t.Fatalf("path %q: error leaks the outside: %v", p, err)
		}
	}
	for path, want := range canary {
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("path %q: canary %s changed", p, path)
		}
	}
}
