package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
)

func rulesService(t *testing.T, text string) (*Service, string, string) {
	t.Helper()
	base := t.TempDir()
	root, file := filepath.Join(base, "root"), filepath.Join(base, "conf", "rules")
	wput(t, file, text)
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rules, err := rulesfile.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s, err := New(r, Options{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return s, root, file
}

func checkOf(t *testing.T, s *Service, tool string, paths ...string) *fsmcpv1.CheckResponse {
	t.Helper()
	req := &fsmcpv1.CheckRequest{Tool: tool}
	for _, p := range paths {
		req.Paths = append(req.Paths, []byte(p))
	}
	resp, err := s.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("Check(%s %q) = %v", tool, paths, err)
	}
	return resp
}

var (
	ruleAllow = fsmcpv1.RuleAction_RULE_ACTION_ALLOW
	ruleDeny  = fsmcpv1.RuleAction_RULE_ACTION_DENY
	ruleAsk   = fsmcpv1.RuleAction_RULE_ACTION_ASK
	ruleNone  = fsmcpv1.RuleAction_RULE_ACTION_UNSPECIFIED
)

// The first matching line wins for a path; across a call's paths the
// strictest; paths are judged as they resolve (.., symlinked directories,
// a symlink's target), not as spelled.
func TestRulesPrecedence(t *testing.T) {
	s, root, _ := rulesService(t, `# comments and blank lines are skipped

allow fs_write notes/ok.txt
deny  fs_write notes
ask   fs_*     /build/**
allow *        build
deny  fs_read  secret.txt
`)
	wput(t, filepath.Join(root, "notes", "ok.txt"), "")
	wput(t, filepath.Join(root, "secret.txt"), "")
	os.MkdirAll(filepath.Join(root, "build", "out"), 0o755)
	os.MkdirAll(filepath.Join(root, "other"), 0o755)
	os.Symlink("notes", filepath.Join(root, "lnk"))
	os.Symlink("secret.txt", filepath.Join(root, "s"))
	for _, c := range []struct {
		tool  string
		paths []string
		want  fsmcpv1.RuleAction
		line  int32
	}{
		{"fs_write", []string{"notes/ok.txt"}, ruleAllow, 3},
		{"fs_write", []string{"notes/x.txt"}, ruleDeny, 4},
		{"fs_write", []string{"notes"}, ruleDeny, 4},
		{"fs_write", []string{"other/../notes/x.txt"}, ruleDeny, 4},
		{"fs_write", []string{"lnk/x.txt"}, ruleDeny, 4},
		{"fs_write", []string{"notes/new/deeper/x"}, ruleDeny, 4},
		{"fs_write", []string{"other/new/../../notes/n"}, ruleDeny, 4},
		{"fs_delete", []string{"build/out"}, ruleAsk, 5},
		{"fs_delete", []string{"build"}, ruleAsk, 5},
		{"fs_mkdir", []string{"build/a/b/c"}, ruleAsk, 5},
		{"exec", []string{"build/out"}, ruleAllow, 6},
		{"fs_read", []string{"secret.txt"}, ruleDeny, 7},
		{"fs_read", []string{"s"}, ruleDeny, 7},
		{"fs_stat", []string{"secret.txt"}, ruleNone, 0},
		{"fs_move", []string{"other", "build/x"}, ruleAsk, 5},
		{"fs_move", []string{"build/out", "notes/y"}, ruleAsk, 5},
		{"fs_write", []string{"build/out/f", "notes/z"}, ruleDeny, 4},
		{"fs_read", []string{""}, ruleNone, 0},
	} {
		got := checkOf(t, s, c.tool, c.paths...)
		if got.GetAction() != c.want || got.GetLine() != c.line {
			t.Errorf("Check(%s %q) = %v line %d (%s), want %v line %d", c.tool, c.paths, got.GetAction(), got.GetLine(), got.GetRule(), c.want, c.line)
		}
		if strings.Contains(string(got.GetPath()), root) {
			t.Errorf("Check names a host path: %q", got.GetPath())
		}
	}
}

// rulesCall is a call's rule context as the interceptor builds it from
// the front-end's metadata: the tool and what Check judged.
func rulesCall(s *Service, tool string, judged map[judgedKey]fsmcpv1.RuleAction) context.Context {
	cr := s.newCallRules(tool)
	cr.judged = judged
	return context.WithValue(context.Background(), callRulesKey{}, cr)
}

// The rules are judged again at the call, on the real path the call's own
// resolution finds: a path that leads elsewhere than Check judged (a
// symlink swapped meanwhile) is precondition_failed, a denied one
// permission_denied, an ask rule met by a call that named no path for the
// person refused; nothing is written in any of those. A search's
// resolution judges the same way.
func TestRulesAtCall(t *testing.T) {
	s, root, _ := rulesService(t, "deny fs_write secret\nask fs_write pub\ndeny fs_grep secret\n")
	for _, d := range []string{"pub", "other", "secret"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.Symlink("pub", filepath.Join(root, "cur"))
	write := func(ctx context.Context, p string) error {
		_, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte(p), Content: []byte("x"), MustNotExist: true})
		return err
	}
	ask := fsmcpv1.RuleAction_RULE_ACTION_ASK
	if err := write(rulesCall(s, "fs_write", map[judgedKey]fsmcpv1.RuleAction{{"cur/a", "pub/a"}: ask}), "cur/a"); err != nil {
		t.Fatalf("the write judged and approved: %v", err)
	}
	os.Remove(filepath.Join(root, "cur"))
	os.Symlink("other", filepath.Join(root, "cur"))
	err := write(rulesCall(s, "fs_write", map[judgedKey]fsmcpv1.RuleAction{{"cur/b", "pub/b"}: ask}), "cur/b")
	wantWriteCode(t, "a write that leads elsewhere than judged", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	// The same path judged with another decision than the rules give now
	// (the rules file changed in between).
	err = write(rulesCall(s, "fs_write", map[judgedKey]fsmcpv1.RuleAction{{"pub/c", "pub/c"}: ruleNone}), "pub/c")
	wantWriteCode(t, "a write judged with a stale decision", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	err = write(rulesCall(s, "fs_write", map[judgedKey]fsmcpv1.RuleAction{{"secret/d", "secret/d"}: ruleDeny}), "secret/d")
	if e := wantWriteCode(t, "a denied write", err, fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED); !e.PolicyViolation {
		t.Error("a denied write is not marked a policy violation")
	}
	err = write(rulesCall(s, "fs_write", nil), "pub/e")
	wantWriteCode(t, "an ask rule with no path judged", err, fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	err = write(context.Background(), "other/f")
	wantWriteCode(t, "a call with no rule context", err, fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL)
	for _, n := range []string{"other/b", "pub/b", "pub/c", "secret/d", "pub/e", "other/f"} {
		if exists(filepath.Join(root, n)) {
			t.Errorf("%s was written", n)
		}
	}
	// A search: cur → secret now, judged by Check when it led to other.
	os.Remove(filepath.Join(root, "cur"))
	os.Symlink("secret", filepath.Join(root, "cur"))
	_, err = s.openSearch(rulesCall(s, "fs_grep", map[judgedKey]fsmcpv1.RuleAction{{"cur", "other"}: ruleNone}), "grep", []byte("cur"), accessContent)
	wantWriteCode(t, "a search that leads to a denied directory", err, fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	tgt, err := s.openSearch(rulesCall(s, "fs_grep", map[judgedKey]fsmcpv1.RuleAction{{"pub", "pub"}: ruleNone}), "grep", []byte("pub"), accessContent)
	if err != nil {
		t.Fatalf("a search judged as it resolves: %v", err)
	}
	tgt.close()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
