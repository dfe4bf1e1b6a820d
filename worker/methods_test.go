package worker

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"google.golang.org/grpc"
)

// pathlessMethods take no client path, so neither the escape table nor
// the path fuzzer has anything to send them. Each needs its reason.
var pathlessMethods = map[string]string{
	"Hello": "the protocol handshake: a version number, no path",
}

// methodRecorder records the full method name of every RPC a client makes.
type methodRecorder struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (r *methodRecorder) add(method string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[method] = true
}

func (r *methodRecorder) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			r.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			r.add(method)
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if method == fsmcpv1.WorkerService_Calls_FullMethodName {
				cs = &callsRecorder{ClientStream: cs, r: r}
			}
			return cs, err
		}),
	}
}

// callsRecorder records each kind of call sent on the Calls stream as
// the method Calls.<kind>.
type callsRecorder struct {
	grpc.ClientStream
	r *methodRecorder
}

func (c *callsRecorder) SendMsg(m any) error {
	if req, ok := m.(*fsmcpv1.CallsRequest); ok && req.GetCall() != nil {
		c.r.add(fsmcpv1.WorkerService_Calls_FullMethodName + "." + string(req.ProtoReflect().WhichOneof(callsOneof).Name()))
	}
	return c.ClientStream.SendMsg(m)
}

// callsOneof is the CallsRequest field that holds the call.
var callsOneof = (&fsmcpv1.CallsRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("call")

// missing lists the service's path-taking methods that r never saw.
func (r *methodRecorder) missing() []string {
	var out []string
	for _, name := range serviceMethods() {
		if _, ok := pathlessMethods[name]; ok {
			continue
		}
		if !r.seen["/"+fsmcpv1.WorkerService_ServiceDesc.ServiceName+"/"+name] {
			out = append(out, name)
		}
	}
	return out
}

// serviceMethods is every method of the generated service descriptor,
// unary and streaming, and each kind of call the Calls stream carries, as
// Calls.<kind>.
func serviceMethods() []string {
	d := fsmcpv1.WorkerService_ServiceDesc
	var names []string
	for _, m := range d.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range d.Streams {
		names = append(names, s.StreamName)
	}
	fields := callsOneof.Fields()
	for i := range fields.Len() {
		names = append(names, "Calls."+string(fields.Get(i).Name()))
	}
	sort.Strings(names)
	return names
}

// TestPolicyEveryMethodCovered enumerates the worker service's methods
// (and the kinds of call the Calls stream carries) from the generated
// descriptor and fails for any that the escape table
// (worker/workertest) or the path fuzzer (FuzzPaths) never calls. A new
// RPC lands with a row in the table and a call in fuzzPath, or this
// fails; a method with no path argument is listed in pathlessMethods with
// its reason.
func TestPolicyEveryMethodCovered(t *testing.T) {
	for name := range pathlessMethods {
		if !slices.Contains(serviceMethods(), name) {
			t.Errorf("pathlessMethods lists %s, which the service does not have", name)
		}
	}
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("escape table", func(t *testing.T) {
		var rec methodRecorder
		workertest.RunAll(t, func(t *testing.T, dir string) fsmcpv1.WorkerServiceClient {
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { root.Close() })
			s, err := New(root, Options{RG: rg, MaxRead: 1 << 16})
			if err != nil {
				t.Fatal(err)
			}
			return serveInProcess(t, s, rec.options()...)
		})
		if m := rec.missing(); len(m) > 0 {
			t.Errorf("no row of the escape table (worker/workertest) calls %v", m)
		}
	})
	t.Run("fuzzer", func(t *testing.T) {
		var rec methodRecorder
		base, s, canary := fuzzTree(t)
		for _, c := range fuzzClients(t, serveInProcess(t, s, rec.options()...)) {
			fuzzPath(t, c, []byte("d/e/upup/secret"), base, canary)
		}
		if m := rec.missing(); len(m) > 0 {
			t.Errorf("FuzzPaths (fuzzPath in worker/fuzz_test.go) never calls %v", m)
		}
	})
}
