package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rulesRaceTree makes pub/, secret/ and the symlinks cur → pub and
// alt → secret in a fresh root.
func rulesRaceTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	for _, d := range []string{"pub", "secret"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"cur": "pub", "alt": "secret"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// callText calls a tool from any goroutine and returns its reply text and
// whether it failed.
func callText(s *server, name string, args map[string]any) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", true, err
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError, nil
}

// TestRulesRaceRename: `deny fs_write secret` must hold for the name a
// write resolves when it runs, not only when the front-end asked Check.
// One goroutine writes cur/x over and over while another swaps the
// symlink cur between pub and secret with fs_move (the agent's own
// renames, through the same server). Nothing may appear in secret: each
// write (of a new file cur/xN) either lands in pub or is refused, by Check or, when the swap
// fell between Check and the write, by the worker at the call. The trial
// runs until the worker has refused such a write a few times, so the race
// is known to have been hit; judged only by Check, the writes land in
// secret within the first hundreds.
func TestRulesRaceRename(t *testing.T) {
	root := rulesRaceTree(t)
	file := rulesFile(t, root, "deny fs_write secret\n")
	s := start(t, root, "--rules", file)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		// cur → pub, alt → secret; then the other way round; and back.
		steps := [][2]string{{"cur", "hold"}, {"alt", "cur"}, {"hold", "alt"}}
		for !stop.Load() {
			for _, st := range steps {
				if _, failed, err := callText(s, "fs_move", map[string]any{"from": st[0], "to": st[1]}); err != nil || failed {
					t.Errorf("swap %s → %s failed", st[0], st[1])
					stop.Store(true)
					return
				}
			}
			swaps.Add(1)
		}
	}()
	var landed, byCheck, atCall, other int
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; atCall < 5 && time.Now().Before(deadline) && !stop.Load(); i++ {
		text, failed, err := callText(s, "fs_write", map[string]any{"path": fmt.Sprintf("cur/x%d", i), "content": "w\n", "if_sha256": nil})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !failed:
			landed++
		case strings.Contains(text, "as the call runs") || strings.Contains(text, "not to what --rules judged"):
			atCall++
		case strings.Contains(text, "is denied by --rules"):
			byCheck++
		default:
			other++ // cur missing for an instant, mostly
		}
		if names, _ := os.ReadDir(filepath.Join(root, "secret")); len(names) > 0 {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("a write landed in secret, which the rules deny (after %d writes, %d swaps): %s", landed+byCheck+atCall+other, swaps.Load(), text)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d swaps; writes: %d landed in pub, %d refused by Check, %d refused at the call, %d other", swaps.Load(), landed, byCheck, atCall, other)
	if atCall == 0 {
		t.Fatal("no write was judged differently at the call than by Check: the race was never hit")
	}
	if landed == 0 {
		t.Error("no write landed in pub: the trial did not exercise allowed writes")
	}
}

// TestRulesApprovalBoundToResolved: with `ask fs_write pub` and `ask
// fs_write secret`, the person is asked about cur/y where cur → pub, and
// the question says where it leads. While the person answers, the agent
// swaps cur to secret. The retried call resolves to secret/y, which the
// person was never asked about: it is refused and nothing is written,
// under both protocol revisions. Without the swap, the same approval
// writes pub/y.
func TestRulesApprovalBoundToResolved(t *testing.T) {
	for _, protocol := range approveProtocols {
		t.Run(protocol, func(t *testing.T) {
			root := rulesRaceTree(t)
			file := rulesFile(t, root, "ask fs_write pub\nask fs_write secret\n")
			var swap func()
			p := &person{answer: func(*mcp.ElicitRequest) *mcp.ElicitResult {
				if swap != nil {
					swap()
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"remember": false}}
			}}
			s := startWith(t, root, &mcp.ClientOptions{ElicitationHandler: p.handle}, protocol, "--rules", file)
			s.wantOK("fs_write", map[string]any{"path": "cur/y", "content": "approved\n", "if_sha256": nil})
			if got := string(readFile(t, filepath.Join(root, "pub", "y"))); got != "approved\n" {
				t.Fatalf("pub/y = %q", got)
			}
			if q := p.asked(); len(q) != 1 || !strings.Contains(q[0], `"cur/y" → "pub/y"`) {
				t.Fatalf("the question does not say where the path leads: %q", q)
			}
			// The agent's own renames, while the person reads the question.
			other := start(t, root, "--rules", file)
			swap = func() {
				for _, st := range [][2]string{{"cur", "hold"}, {"alt", "cur"}} {
					if _, failed, err := callText(other, "fs_move", map[string]any{"from": st[0], "to": st[1]}); err != nil || failed {
						t.Errorf("swap %s → %s failed", st[0], st[1])
					}
				}
				swap = nil
			}
			r := s.call("fs_write", map[string]any{"path": "cur/z", "content": "not approved\n", "if_sha256": nil})
			if !r.isError || r.code() != "permission_denied" {
				t.Fatalf("the retried call after the swap = %s, want permission_denied", r.text)
			}
			if exists(t, filepath.Join(root, "secret", "z")) || exists(t, filepath.Join(root, "pub", "z")) {
				t.Fatal("the call the person approved for pub/z wrote after its path moved")
			}
			if q := p.asked(); len(q) != 2 || !strings.Contains(q[1], `"cur/z" → "pub/z"`) {
				t.Fatalf("questions: %q", q)
			}
			var doc map[string]any
			json.Unmarshal([]byte(r.text), &doc)
			t.Logf("refused: %v", doc["error"])
		})
	}
}

// TestRulesEveryTool: under --rules every tool still works, each of its
// worker calls carrying the tool and what Check judged, and each judged
// again as it resolves (a tool whose calls lacked that context would fail
// with internal). Every tool the server lists is called.
func TestRulesEveryTool(t *testing.T) {
	root, qdir := quarantineTree(t)
	file := rulesFile(t, root, "deny * nothing/here\n")
	s := start(t, root, "--rules", file, "--quarantine", qdir)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")
	if err := os.WriteFile(filepath.Join(root, "dot.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	hello := sha([]byte("hello\n"))
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"fs_stat", map[string]any{"path": "a.txt"}},
		{"fs_list", map[string]any{"path": "sub"}},
		{"fs_read", map[string]any{"path": "link_in"}},
		{"fs_read_many", map[string]any{"paths": []any{"a.txt", "sub/b.txt"}}},
		{"fs_glob", map[string]any{"path": "", "pattern": "*.txt"}},
		{"fs_grep", map[string]any{"path": "sub", "pattern": "bee"}},
		{"fs_tree", map[string]any{"path": ""}},
		{"fs_digest", map[string]any{"path": ""}},
		{"fs_digest", map[string]any{"path": "sub"}},
		{"fs_write", map[string]any{"path": "w.txt", "content": "w\n", "if_sha256": nil}},
		{"fs_replace", map[string]any{"path": "a.txt", "if_sha256": hello, "edits": []map[string]any{{"old": "hello", "new": "howdy"}}}},
		{"fs_splice", map[string]any{"path": "w.txt", "offset": 0, "insert": "x", "if_sha256": sha([]byte("w\n"))}},
		{"fs_mkdir", map[string]any{"path": "new/deeper"}},
		{"fs_copy", map[string]any{"from": "sub/b.txt", "to": "new/copy"}},
		{"fs_move", map[string]any{"from": "new", "to": "moved"}},
		{"fs_patch", map[string]any{"patch": "--- a/moved/copy\n+++ b/moved/copy\n@@ -1 +1 @@\n-bee\n+wasp\n", "if_sha256": map[string]any{"moved/copy": sha([]byte("bee\n"))}}},
		{"fs_delete", map[string]any{"path": "moved", "recursive": true}},
	}
	called := map[string]bool{"fs_checkpoint": true, "fs_rewind": true, "fs_checkpoints": true}
	cp := s.wantOK("fs_checkpoint", map[string]any{"label": "before the calls"}).str("id")
	var undo string
	for _, c := range calls {
		r := s.wantOK(c.tool, c.args)
		called[c.tool] = true
		if c.tool == "fs_delete" {
			undo = r.str("undo")
		}
	}
	s.wantOK("fs_undo", map[string]any{"undo": undo})
	called["fs_undo"] = true
	s.wantOK("fs_rewind", map[string]any{"id": cp, "dry_run": true})
	s.wantOK("fs_rewind", map[string]any{"id": cp, "path": "sub"})
	s.wantOK("fs_rewind", map[string]any{"id": cp})
	s.wantOK("fs_checkpoints", map[string]any{})
	// A patch of a name that is not UTF-8 names it in if_sha256_base64.
	odd := "n\xff"
	if err := os.WriteFile(filepath.Join(root, odd), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	patch := "--- a/" + odd + "\n+++ b/" + odd + "\n@@ -1 +1 @@\n-old\n+new\n"
	s.wantOK("fs_patch", map[string]any{"patch": base64.StdEncoding.EncodeToString([]byte(patch)), "encoding": "base64",
		"if_sha256_base64": map[string]any{base64.StdEncoding.EncodeToString([]byte(odd)): sha([]byte("old\n"))}})
	if got := string(readFile(t, filepath.Join(root, odd))); got != "new\n" {
		t.Errorf("the non-UTF-8 patch left %q", got)
	}
	// fs_view answers a picture as a second content block.
	if text, failed, err := callText(s, "fs_view", map[string]any{"path": "dot.png"}); err != nil || failed {
		t.Errorf("fs_view under --rules: %v %s", err, text)
	}
	called["fs_view"] = true
	res, err := s.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if !called[tl.Name] {
			t.Errorf("%s is served but not called under --rules here", tl.Name)
		}
	}
	// And deny holds for each kind of resolution, fs_patch's files too.
	os.MkdirAll(filepath.Join(root, "nothing", "here"), 0o755)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"fs_stat", map[string]any{"path": "nothing/here"}},
		{"fs_list", map[string]any{"path": "nothing/here"}},
		{"fs_tree", map[string]any{"path": "nothing/here"}},
		{"fs_mkdir", map[string]any{"path": "nothing/here/x"}},
		// fs_patch names its files as the keys of if_sha256.
		{"fs_patch", map[string]any{"patch": "--- /dev/null\n+++ b/nothing/here/p\n@@ -0,0 +1 @@\n+x\n", "if_sha256": map[string]any{"nothing/here/p": nil}}},
	} {
		s.wantErr(c.tool, c.args, "permission_denied")
	}
}
