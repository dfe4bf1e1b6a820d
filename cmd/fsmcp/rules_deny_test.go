package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A --rules deny line hides content as --deny does: the same probes, run
// against a server with --deny GLOB and against one with the rules line
// "deny * GLOB", must end alike, and neither may show denied content. A
// control without either shows it, so each probe is one that reaches the
// content when nothing stops it.

// Markers of the denied content and of a public file, and the names of
// the denied files (which a search by file must not list).
const (
	keySecret  = "KEY-SECRET-7731"
	envSecret  = "ENV-SECRET-4402"
	subSecret  = "SUB-SECRET-5150"
	publicText = "PUBLIC-TEXT-9"
)

var (
	secretContent = []string{keySecret, envSecret, subSecret}
	secretNames   = []string{"private/key.txt", "private/pic.png", `.env"`}
)

// rulesDenyTree is a root with a denied directory w/private, a hard link
// to its key outside it, .env files at two depths, public files, and a git
// repository holding the same (configured to name a diff's files relative
// to the working directory, without prefixes), with committed content
// changed in the work tree and in the index.
func rulesDenyTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"w/private/key.txt": keySecret + "\n",
		".env":              envSecret + "\n",
		"w/sub/.env":        subSecret + "\n",
		"w/public.txt":      publicText + "\n",
	}
	for p, c := range files {
		putFile(t, filepath.Join(root, p), c, 0o644)
		putFile(t, filepath.Join(root, "repo", p), "old "+c, 0o644)
	}
	writeFile(t, filepath.Join(root, "w/private/pic.png"), mediaFiles(t)["image/png"], 0o644)
	if err := os.Link(filepath.Join(root, "w/private/key.txt"), filepath.Join(root, "w/hard.txt")); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "repo")
	git(t, repo, "init", "-q")
	// Configuration that would change how a diff names its files.
	git(t, repo, "config", "diff.relative", "true")
	git(t, repo, "config", "diff.noprefix", "true")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "one")
	for p, c := range files {
		putFile(t, filepath.Join(repo, p), "staged "+c, 0o644)
	}
	git(t, repo, "add", "-A")
	for p, c := range files {
		putFile(t, filepath.Join(repo, p), "new "+c, 0o644)
	}
	return root
}

// rulesDenyProbe is one way a tool could show denied content; run returns
// what the reply showed: its error code, or "ok" and the markers in it. A
// listing lists names, denied ones too, and never content; a search must
// not name a denied file either (a search by file lists the files whose
// content matches). One that shows public content must still show it.
type rulesDenyProbe struct {
	name                    string
	run                     func(s *server) string
	listing, search, public bool
}

// shown summarises r: its error code, or "ok" with the markers found.
func shown(r reply) string {
	if r.isError {
		return r.code()
	}
	out := "ok"
	for _, m := range slices.Concat(secretContent, secretNames, []string{publicText}) {
		if strings.Contains(r.text, m) {
			out += " " + m
		}
	}
	return out
}

// contentOf is the content markers r shows, whether it is an error or not:
// for calls that --rules refuses as a whole (they name a denied path)
// where --deny answers with an error of its own, or not_found.
func contentOf(r reply) string {
	out := "content:"
	for _, m := range append(slices.Clone(secretContent), publicText) {
		if strings.Contains(r.text, m) {
			out += " " + m
		}
	}
	return out
}

func rulesDenyProbes() []rulesDenyProbe {
	call := func(tool string, args map[string]any) func(s *server) string {
		return func(s *server) string { return shown(s.call(tool, args)) }
	}
	var probes []rulesDenyProbe
	for _, path := range []string{"", "w", "w/sub", "w/private", ".env"} {
		for _, output := range []string{"matches", "files", "count"} {
			probes = append(probes, rulesDenyProbe{name: "grep " + output + " " + path, search: true, public: output == "matches" && (path == "" || path == "w"), run: call("fs_grep",
				map[string]any{"pattern": "SECRET|PUBLIC", "path": path, "output": output, "hidden": true, "no_ignore": true})})
		}
	}
	probes = append(probes,
		rulesDenyProbe{name: "grep with globs", search: true, run: call("fs_grep", map[string]any{"pattern": "SECRET", "path": "",
			"glob": []string{"**/key.txt", ".env", "w/private/**"}, "hidden": true, "no_ignore": true})},
		rulesDenyProbe{name: "glob", listing: true, run: call("fs_glob", map[string]any{"pattern": "**/*.txt", "path": "", "hidden": true})},
		rulesDenyProbe{name: "tree", listing: true, run: call("fs_tree", map[string]any{"path": "w", "hidden": true})},
		rulesDenyProbe{name: "digest root", run: call("fs_digest", map[string]any{"path": ""})},
		rulesDenyProbe{name: "digest w/sub", run: call("fs_digest", map[string]any{"path": "w/sub"})},
		rulesDenyProbe{name: "digest key", run: call("fs_digest", map[string]any{"path": "w/private/key.txt"})},
		rulesDenyProbe{name: "read_many", run: func(s *server) string {
			return contentOf(s.call("fs_read_many", map[string]any{"paths": []string{"w/private/key.txt", "w/sub/.env"}}))
		}},
		rulesDenyProbe{name: "view", run: func(s *server) string {
			doc, _, ok := s.view(map[string]any{"path": "w/private/pic.png"})
			if !ok {
				e, _ := doc["error"].(map[string]any)
				return fmt.Sprint(e["code"])
			}
			return "ok " + fmt.Sprint(doc["mime_type"])
		}},
		rulesDenyProbe{name: "copy then read", run: func(s *server) string {
			out := shown(s.call("fs_copy", map[string]any{"from": "w", "to": "w2", "recursive": true}))
			for _, p := range []string{"w2/private/key.txt", "w2/sub/.env", "w2/public.txt"} {
				out += "; " + contentOf(s.call("fs_read", map[string]any{"path": p}))
			}
			return out
		}},
		rulesDenyProbe{name: "copy file then read", run: func(s *server) string {
			return shown(s.call("fs_copy", map[string]any{"from": "w/private/key.txt", "to": "k.txt"})) + "; " +
				contentOf(s.call("fs_read", map[string]any{"path": "k.txt"}))
		}},
		rulesDenyProbe{name: "hard link", run: func(s *server) string {
			// The refused read shows the worker the denied name.
			out := shown(s.call("fs_read", map[string]any{"path": "w/private/key.txt"}))
			out += "; " + shown(s.call("fs_read", map[string]any{"path": "w/hard.txt"}))
			return out + "; " + shown(s.call("fs_grep", map[string]any{"pattern": "SECRET", "path": "w"}))
		}},
		rulesDenyProbe{name: "vcs diff", run: call("fs_vcs_diff", map[string]any{"backend": "git", "path": "repo"})},
		rulesDenyProbe{name: "vcs diff staged", public: true, run: call("fs_vcs_diff", map[string]any{"backend": "git", "path": "repo", "staged": true})},
		rulesDenyProbe{name: "vcs diff staged in w", public: true, run: call("fs_vcs_diff", map[string]any{"backend": "git", "path": "repo/w", "staged": true})},
		rulesDenyProbe{name: "cat", public: true, run: func(s *server) string {
			r := s.execCall(map[string]any{"argv": []string{"cat", "w/private/key.txt", ".env", "w/sub/.env", "w/hard.txt", "w/public.txt"}})
			return fmt.Sprintf("%s exit %d", shown(r), r.exit(s.t))
		}},
		rulesDenyProbe{name: "cat in w", run: func(s *server) string {
			return shown(s.execCall(map[string]any{"argv": []string{"cat", "private/key.txt", "sub/.env"}, "cwd": "w"}))
		}},
		// Last: in the control it moves w away.
		rulesDenyProbe{name: "move then read", run: func(s *server) string {
			return shown(s.call("fs_move", map[string]any{"from": "w", "to": "w3"})) + "; " +
				contentOf(s.call("fs_read", map[string]any{"path": "w3/private/key.txt"}))
		}},
	)
	return probes
}

// rulesDenyFlags are every configuration's flags: a granted cat, and git.
var rulesDenyFlags = []string{"--exec", "/usr/bin/cat", "--vcs", "git"}

// TestRulesDenyAsDeny: the rules "deny * w/private" and "deny * .env" hide
// content exactly as --deny w/private --deny .env do, in search results
// (every output mode, at the root and beneath), globs, trees, digests,
// copies, moves, hard links, read_many, view, vcs diffs and a granted cat; and neither shows
// any of it, while the control without either shows it to every probe.
func TestRulesDenyAsDeny(t *testing.T) {
	probes := rulesDenyProbes()
	outcomes := map[string][]string{}
	run := func(config string, flags ...string) {
		root := rulesDenyTree(t)
		if config == "rules" {
			flags = append(flags, "--rules", rulesFile(t, root, "deny * w/private\ndeny * .env\n"))
		}
		s := start(t, root, append(flags, rulesDenyFlags...)...)
		for _, p := range probes {
			outcomes[config] = append(outcomes[config], p.run(s))
		}
	}
	run("deny", "--deny", "w/private", "--deny", ".env")
	run("rules")
	run("control")
	for i, p := range probes {
		deny, rules, control := outcomes["deny"][i], outcomes["rules"][i], outcomes["control"][i]
		if rules != deny {
			t.Errorf("%s: under --rules %q, under --deny %q", p.name, rules, deny)
		}
		hidden := secretContent
		if p.search {
			hidden = slices.Concat(secretContent, secretNames)
		}
		for _, m := range hidden {
			if strings.Contains(deny, m) || strings.Contains(rules, m) {
				t.Errorf("%s shows %s: under --deny %q, under --rules %q", p.name, m, deny, rules)
			}
		}
		if p.public && !strings.Contains(deny, publicText) {
			t.Errorf("%s: under --deny %q, without the public content", p.name, deny)
		}
		switch {
		case p.listing && (control != deny || !strings.Contains(deny, "private/key.txt")):
			t.Errorf("%s: the control lists %q, --deny %q: want the denied names listed alike", p.name, control, deny)
		case !p.listing && control == deny:
			t.Errorf("%s: the control shows what --deny shows (%q): the probe reaches no denied content", p.name, control)
		}
	}
}

// TestRulesDenyFollowsEdits: the rules file is read again when it changes,
// and the next call and the next command judge content by the new
// version. A deny line hides content from the tools it names only: from
// fs_grep and not from a command, then the other way round. An allow
// line before a deny line lets through what it matches, and only that, in
// searches and in commands alike.
func TestRulesDenyFollowsEdits(t *testing.T) {
	root := rulesDenyTree(t)
	const other, more = "OTHER-SECRET-2718", "MORE-SECRET-1414"
	putFile(t, filepath.Join(root, "w/private/other.txt"), other+"\n", 0o644)
	putFile(t, filepath.Join(root, "w/private/more.txt"), more+"\n", 0o644)
	file := rulesFile(t, root, "deny * w/private\n")
	s := start(t, root, append([]string{"--rules", file}, rulesDenyFlags...)...)
	grep := func() string {
		return contentOf(s.wantOK("fs_grep", map[string]any{"pattern": "SECRET|PUBLIC", "path": "w"}))
	}
	cat := func() string {
		return contentOf(s.execCall(map[string]any{"argv": []string{"cat", "w/private/key.txt", "w/public.txt"}}))
	}
	check := func(version, gotGrep, wantGrep, gotCat, wantCat string) {
		t.Helper()
		if gotGrep != wantGrep || gotCat != wantCat {
			t.Errorf("%s: fs_grep shows %q, want %q; cat shows %q, want %q", version, gotGrep, wantGrep, gotCat, wantCat)
		}
	}
	hidden, shownAll := "content: "+publicText, "content: "+keySecret+" "+publicText
	check("deny *", grep(), hidden, cat(), hidden)

	replace := func(text string) {
		t.Helper()
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	replace("deny fs_grep w/private\n")
	check("deny fs_grep", grep(), hidden, cat(), shownAll)
	// An edit in place.
	if err := os.WriteFile(file, []byte("deny fs_exec w/private\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("deny fs_exec", grep(), shownAll, cat(), hidden)
	replace("")
	check("no rules", grep(), shownAll, cat(), shownAll)

	// other.txt has no other name: its rule in a command is its own.
	replace("allow * w/private/other.txt\ndeny * w/private\n")
	check("allow, then deny", grep(), hidden, cat(), hidden)
	if r := s.wantOK("fs_grep", map[string]any{"pattern": "OTHER", "path": ""}); !strings.Contains(r.text, other) {
		t.Errorf("fs_grep hides the file the allow line lets through: %s", r.text)
	}
	if r := s.execCall(map[string]any{"argv": []string{"cat", "w/private/other.txt"}}); !strings.Contains(r.text, other) || r.exit(t) != 0 {
		t.Errorf("cat cannot read the file the allow line lets through: %s", r.text)
	}
	// more.txt, with no other name either, is still denied.
	if r := s.wantOK("fs_grep", map[string]any{"pattern": "MORE", "path": "w"}); strings.Contains(r.text, more) {
		t.Errorf("fs_grep shows a file the deny line still hides: %s", r.text)
	}
	if r := s.execCall(map[string]any{"argv": []string{"cat", "w/private/more.txt"}}); strings.Contains(r.text, more) || r.exit(t) == 0 {
		t.Errorf("cat reads a file the deny line still hides: %s", r.text)
	}
}
