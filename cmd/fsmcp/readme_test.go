package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// shellWords splits one command line of README's snippets as sh would for
// the quoting they use: single and double quotes, no escapes.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// fsmcpArgs returns the arguments a command line passes to fsmcp: the
// words after the fsmcp binary, up to the first that belongs to the
// program that runs it (the Inspector's --method).
func fsmcpArgs(words []string) ([]string, bool) {
	for i, w := range words {
		if (i == 0 && w == "fsmcp") || strings.HasSuffix(w, "/fsmcp") {
			args := words[i+1:]
			if j := slices.Index(args, "--method"); j >= 0 {
				args = args[:j]
			}
			return args, true
		}
	}
	return nil, false
}

var fenced = regexp.MustCompile("(?s)```(json|sh)\n(.*?)```")

// TestReadmeClients: every client snippet in README's "Clients" section
// parses, and the fsmcp command line each holds (with this test's root,
// token file and audit log in place of the example's) starts a server
// that a client reaches: over stdio, or over HTTP with the token.
func TestReadmeClients(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Clients\n")
	section, _, ok2 := strings.Cut(section, "\n## ")
	if !ok || !ok2 {
		t.Fatal(`README has no "## Clients" section`)
	}
	var commandLines [][]string
	blocks := fenced.FindAllStringSubmatch(section, -1)
	for _, b := range blocks {
		if b[1] == "json" {
			var cfg map[string]map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			}
			if err := json.Unmarshal([]byte(b[2]), &cfg); err != nil {
				t.Errorf("a JSON snippet does not parse: %v\n%s", err, b[2])
				continue
			}
			for _, servers := range cfg {
				for name, srv := range servers {
					args, found := fsmcpArgs(append([]string{srv.Command}, srv.Args...))
					if !found {
						t.Errorf("JSON server %q runs no fsmcp: %q %q", name, srv.Command, srv.Args)
					}
					commandLines = append(commandLines, args)
				}
			}
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(b[2]), "\n") {
			if args, found := fsmcpArgs(shellWords(line)); found {
				commandLines = append(commandLines, args)
			}
		}
	}
	if len(blocks) < 6 || len(commandLines) < 6 {
		t.Fatalf("found %d snippets and %d fsmcp command lines in README's Clients; the section lost its snippets", len(blocks), len(commandLines))
	}
	root, _ := tree(t)
	dir := t.TempDir()
	token := "readme-clients-token-0123456789"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range commandLines {
		var flags []string
		http := false
		for i := 0; i < len(args); i++ {
			switch a := args[i]; a {
			case "--root":
				i++ // this test's root, below
			case "--token-file":
				flags = append(flags, a, tokenFile)
				i++
			case "--audit-log":
				flags = append(flags, a, filepath.Join(dir, "audit.jsonl"))
				i++
			case "--listen":
				flags = append(flags, a, "127.0.0.1:0")
				i++
			default:
				if a == "--transport" && i+1 < len(args) && args[i+1] == "http" {
					http = true
				}
				flags = append(flags, a)
			}
		}
		if !slices.Contains(args, "--root") {
			t.Errorf("fsmcp %q names no --root", args)
			continue
		}
		var s *server
		if http {
			h := runHTTP(t, fsmcpCommand(root, flags...), "bound")
			h.token = token
			s = h.connect("")
		} else {
			s = start(t, root, flags...)
		}
		if r := s.wantOK("fs_list", map[string]any{}); r.doc["entries"] == nil {
			t.Errorf("fsmcp %q: fs_list of the root answered %s", args, r.text)
		}
	}
}
