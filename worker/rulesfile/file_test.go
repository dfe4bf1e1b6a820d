package rulesfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// A file that does not parse is refused with the line that is wrong.
func TestRulesParseErrors(t *testing.T) {
	for text, want := range map[string]string{
		"permit fs_read a\n":       "line 1",
		"allow fs_read\n":          "want: allow|deny|ask",
		"\n\nallow fs_read a/\n":   "line 3",
		"allow [ a\n":              "not a valid pattern",
		"deny fs_read ../a\n":      "component",
		"deny fs_read a\nask x\n":  "line 2",
		"deny fs_read {a,b\n":      "not a valid glob",
		"allow fs_read //a\n":      "//",
		"deny fs_read a\x00b\n":    "NUL",
		"deny fs_read docs/a b\n":  "",
		"ask * my notes/**/*.md\n": "",
	} {
		_, err := parse([]byte(text))
		if want == "" {
			if err != nil {
				t.Errorf("parse %q: %v, want ok", text, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parse %q: %v, want %q", text, err, want)
		}
	}
}

// The first line for the tool that matches the path or a directory above
// it wins; a deny line's glob hides content from its tools only.
func TestRulesFirstAndLines(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(file, []byte("allow fs_write notes/ok.txt\ndeny fs_write notes\nask fs_* /build/**\ndeny fs_read secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	rules := f.Current()
	for _, c := range []struct {
		tool, rel string
		line      int
	}{
		{"fs_write", "notes/ok.txt", 1},
		{"fs_write", "notes/x", 2},
		{"fs_write", "notes", 2},
		{"fs_delete", "build/a/b", 3},
		{"fs_read", "secret/key", 4},
		{"fs_stat", "secret", 0},
		{"fs_write", "build2", 0},
	} {
		r, ok := First(rules, c.tool, c.rel)
		if ok != (c.line > 0) || r.Line != c.line {
			t.Errorf("First(%s, %q) = line %d, %v; want line %d", c.tool, c.rel, r.Line, ok, c.line)
		}
	}
	if lines := f.Lines("fs_read"); len(lines) != 2 || !lines[1].Deny || lines[0].Deny {
		t.Errorf("Lines(fs_read) = %+v, want the ask line and the deny line", lines)
	}
	if !f.AnyDeny("secret") || !f.AnyDeny("notes/a") || f.AnyDeny("build/a") {
		t.Error("AnyDeny judges another set of paths than the deny lines")
	}
}

// The file is read again when it changes, by atomic replace or in place; a
// bad edit, or the file going away, keeps the rules in force.
func TestRulesReadAgain(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rules")
	put := func(p, text string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(file, "deny fs_read a\n")
	f, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	want := func(step string, action fsmcpv1.RuleAction) {
		t.Helper()
		r, _ := First(f.Current(), "fs_read", "a")
		if r.Action != action {
			t.Fatalf("%s: %v, want %v", step, r.Action, action)
		}
	}
	want("start", fsmcpv1.RuleAction_RULE_ACTION_DENY)
	put(file+".new", "allow fs_read a\n")
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	want("atomic replace", fsmcpv1.RuleAction_RULE_ACTION_ALLOW)
	w, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("ask fs_read a\n")
	w.Close()
	want("in-place edit", fsmcpv1.RuleAction_RULE_ACTION_ASK)
	put(file, "forbid fs_read a\n")
	want("bad edit", fsmcpv1.RuleAction_RULE_ACTION_ASK)
	os.Remove(file)
	want("file gone", fsmcpv1.RuleAction_RULE_ACTION_ASK)
	put(file, "deny fs_read *\n")
	want("file back", fsmcpv1.RuleAction_RULE_ACTION_DENY)
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
	put(file, "deny fs_read a\nbad\n")
	if _, err := Open(file); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Open of a bad file = %v, want line 2", err)
	}
}
