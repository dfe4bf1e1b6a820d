package main

import (
	"context"
	"encoding/json"
	"go/build"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker/workertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The escape table against the real worker: this test binary re-exec'd as
// __worker, confined with Landlock and seccomp, spoken to directly over
// its socketpair with no front-end in between.
func TestConformanceConfinedWorker(t *testing.T) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Fatal(err)
	}
	workertest.RunAll(t, func(t *testing.T, root string) fsmcpv1.WorkerServiceClient {
		w, err := sandbox.StartWorker(os.Args[0], sandbox.WorkerConfig{Root: root, RG: rg, MaxRead: 1 << 16,
			Quarantine: workertest.QuarantineDir(root), QuarantineBytes: 1 << 20, Rules: workertest.RulesFile(root)}, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			w.Conn.Close()
			select {
			case <-w.Exited:
			case <-time.After(10 * time.Second):
				t.Error("the worker did not exit on EOF")
			}
		})
		cc, err := grpc.NewClient("passthrough:///worker", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return w.Conn, nil }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		c := fsmcpv1.NewWorkerServiceClient(cc)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hello, err := c.Hello(ctx, &fsmcpv1.HelloRequest{Version: fsmcpv1.ProtocolVersion_PROTOCOL_VERSION_1}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		if conf := hello.GetConfinement(); conf.GetLandlockAbi() < 1 || conf.GetSeccomp() != "filter" {
			t.Fatalf("the worker is not confined: %v", conf)
		}
		return c
	})
}

// conformanceScenarios are the server scenarios of the MCP conformance
// suite (@modelcontextprotocol/conformance) that apply to fsmcp. The rest
// call the suite's own fixtures (test_simple_text, test_error_handling,
// json_schema_2020_12_tool, resources, prompts), or capabilities fsmcp
// does not declare (logging, completions): fsmcp has none of them by
// design, so they fail against any server but the suite's reference one.
var conformanceScenarios = []string{
	"server-initialize",
	"ping",
	"tools-list",
	"server-sse-multiple-streams",
	"dns-rebinding-protection",
}

// conformanceSuite returns the Node 22 binary and the suite's entry point
// that scripts/test.sh installs (npm packages node-linux-* and
// @modelcontextprotocol/conformance), skipping the test, with how to get
// them, when they are not there.
func conformanceSuite(t *testing.T) (node, suite string) {
	dir := os.Getenv("FSMCP_CONFORMANCE_DIR")
	if dir == "" {
		dir = filepath.Join(build.Default.GOPATH, "fsmcp-tools", "conformance")
	}
	node = filepath.Join(dir, "node_modules", ".bin", "node")
	suite = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("the MCP conformance suite is not installed in %s (scripts/test.sh installs it with npm; "+
				"it needs Node 22 or newer): %v", dir, err)
		}
	}
	return node, suite
}

// The MCP conformance suite's applicable server scenarios, run by the
// suite's own client (Node) against fsmcp over Streamable HTTP. The suite
// cannot send a bearer token, so a proxy in the test adds fsmcp's; it
// passes Host and Origin through unchanged, which the DNS-rebinding
// scenario tests. Once more with --structured-content, whose outputSchemas
// the tools-list scenario checks.
func TestContactConformanceSuite(t *testing.T) {
	node, suite := conformanceSuite(t)
	for _, flags := range [][]string{nil, {"--structured-content"}} {
		h := startHTTP(t, t.TempDir(), flags...)
		target, err := url.Parse(h.base)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1 // server-sent events as they come
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+h.token)
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		for _, scenario := range conformanceScenarios {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := exec.CommandContext(ctx, node, suite, "server", "--url", front.URL+"/mcp",
				"--scenario", scenario, "-o", out)
			log, err := cmd.CombinedOutput()
			cancel()
			checks := conformanceChecks(t, out)
			passed := 0
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS":
					passed++
				case "FAILURE":
					t.Errorf("%v %s: %s failed: %s", flags, scenario, c.ID, c.ErrorMessage)
				}
			}
			if err != nil || passed == 0 {
				t.Errorf("%v %s: %d checks passed, suite exit %v\n%s", flags, scenario, passed, err, log)
			}
			t.Logf("%v %s: %d of %d checks passed", flags, scenario, passed, len(checks))
		}
	}
}

// conformanceCheck is one entry of the suite's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// conformanceChecks reads the checks the suite wrote below dir.
func conformanceChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	var all []conformanceCheck
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, cs...)
	}
	return all
}

// The official TypeScript SDK's client, installed with the suite, checks
// each structuredContent against the tool's outputSchema itself (with
// Ajv) and throws on a mismatch or on a success without one: with
// --structured-content, it lists the tools and calls several, successes
// and a refusal, over stdio.
func TestContactStructuredContentTypeScriptClient(t *testing.T) {
	node, suite := conformanceSuite(t)
	sdk := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(suite))), "sdk", "dist", "esm", "client")
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a.txt"), []byte("alpha\nbeta\n"), 0o644)
	script := filepath.Join(t.TempDir(), "client.mjs")
	writeFile(t, script, []byte(`
import { Client } from "`+sdk+`/index.js";
import { StdioClientTransport } from "`+sdk+`/stdio.js";
const [exe, root] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: exe, args: ["--root", root, "--structured-content"],
  env: { ...process.env, FSMCP_TEST_FRONTEND: "1" }, stderr: "ignore" });
const client = new Client({ name: "fsmcp-ts-test", version: "1" });
await client.connect(transport);
const { tools } = await client.listTools();
const declared = tools.filter((t) => t.outputSchema).length;
const calls = [["fs_stat", { path: "" }], ["fs_list", { path: "" }], ["fs_read", { path: "a.txt", line: 2 }],
  ["fs_grep", { path: "", pattern: "beta", context: 1 }], ["fs_glob", { path: "", pattern: "*" }],
  ["fs_tree", { path: "" }], ["fs_mkdir", { path: "d" }], ["fs_read", { path: "missing" }]];
const out = [];
for (const [name, args] of calls) {
  const r = await client.callTool({ name, arguments: args });
  out.push(name + (r.isError ? " error " + r.structuredContent.error.code : " ok"));
}
await client.close();
console.log(JSON.stringify({ tools: tools.length, declared, out }));
`), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, node, script, os.Args[0], root).CombinedOutput()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, b)
	}
	var got struct {
		Tools, Declared int
		Out             []string
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	want := []string{"fs_stat ok", "fs_list ok", "fs_read ok", "fs_grep ok", "fs_glob ok", "fs_tree ok", "fs_mkdir ok", "fs_read error not_found"}
	if got.Tools == 0 || got.Declared != got.Tools || strings.Join(got.Out, ", ") != strings.Join(want, ", ") {
		t.Errorf("TypeScript client: %s, want every tool with an outputSchema and %v", b, want)
	}
}
