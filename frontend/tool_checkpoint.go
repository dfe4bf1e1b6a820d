package frontend

import (
	"context"
	"strings"
	"sync"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

type checkpointIn struct {
	Label *string `json:"label,omitempty" jsonschema:"a few words to recognise the checkpoint by"`
}

var checkpointTool = toolDecl[checkpointIn]{
	name:  "fs_checkpoint",
	title: "Take a checkpoint",
	description: "Record the whole tree's state (names, types, modes, content hashes) as a checkpoint " +
		"that fs_rewind can bring the tree back to. Nothing is copied: from now on every change made through these tools " +
		"keeps the version it replaced or removed. Checkpoints survive a restart; the oldest go first under the quarantine's bound.",
	enabled: func(c *Config) bool { return c.Quarantine != "" },
	run:     (*server).checkpoint,
}

func (s *server) checkpoint(ctx context.Context, in *checkpointIn, _ *mcp.CallToolRequest) (*obj, error) {
	req := &fsmcpv1.CheckpointRequest{}
	if in.Label != nil {
		req.Label = *in.Label
	}
	resp, err := s.wc.Checkpoint(ctx, req)
	if err != nil {
		return nil, err
	}
	cp := resp.GetCheckpoint()
	doc := newObj().bool("ok", true).str("id", cp.GetId()).str("label", cp.GetLabel()).str("created", formatTime(cp.GetCreated())).
		str("tree_sha256", resp.GetTreeSha256()).int("files", cp.GetFiles())
	if ev := resp.GetEvictedCheckpoint(); ev != "" {
		doc.str("evicted_checkpoint", ev)
	}
	return doc, nil
}

// evictedMetadata is the worker's trailer naming the checkpoints a
// call's change evicted from the quarantine (worker.EvictedMetadata).
const evictedMetadata = "fsmcp-evicted-checkpoint"

// evictedNote collects, for one tool call, the checkpoints its worker
// calls evicted.
type evictedNote struct {
	mu  sync.Mutex
	ids []string
}

type evictedKey struct{}

func withEvicted(ctx context.Context) (context.Context, *evictedNote) {
	n := &evictedNote{}
	return context.WithValue(ctx, evictedKey{}, n), n
}

// add says in doc which checkpoints the call evicted, unless the tool
// said so itself.
func (n *evictedNote) add(doc *obj) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.ids) > 0 {
		doc.str("evicted_checkpoint", strings.Join(n.ids, ","))
	}
}

// evictedTrailer reads a worker call's eviction trailer into the call's
// note.
func evictedTrailer(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if _, ok := ctx.Value(evictedKey{}).(*evictedNote); !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var md metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&md))...)
	noteEvicted(ctx, md)
	return err
}

// noteEvicted adds the checkpoints a worker call's trailer md names as
// evicted to the call's note, if it has one.
func noteEvicted(ctx context.Context, md metadata.MD) {
	n, ok := ctx.Value(evictedKey{}).(*evictedNote)
	if !ok {
		return
	}
	if ids := md.Get(evictedMetadata); len(ids) > 0 {
		n.mu.Lock()
		n.ids = append(n.ids, ids...)
		n.mu.Unlock()
	}
}
