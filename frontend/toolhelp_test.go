package frontend

import (
	"regexp"
	"strings"
	"testing"
)

// argLine is one argument in --tool-help: name, type and description.
var argLine = regexp.MustCompile(`^  [a-z0-9_]+ \(([^)]*)\):(.*)$`)

// --tool-help describes every argument of every tool a command line can
// serve: no blank description, no type it cannot name.
func TestToolHelpDescribesEveryArgument(t *testing.T) {
	cfg := &Config{Quarantine: "/q", Exec: ExecOptions{Programs: []string{"/bin/cat"}, MaxTimeoutS: 60, VCS: []string{"git"}}}
	var out strings.Builder
	writeToolHelp(&out, cfg)
	lines := strings.Split(out.String(), "\n")
	args := 0
	for _, l := range lines {
		m := argLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		args++
		typ := m[1]
		if strings.TrimSpace(m[2]) == "" {
			t.Errorf("blank description: %q", l)
		}
		for _, w := range strings.Split(strings.TrimSuffix(typ, ", required"), " ") {
			if w == "" || strings.HasSuffix(w, ",") {
				t.Errorf("garbled type %q in %q", typ, l)
			}
		}
	}
	for _, want := range []string{"  hash (boolean): false skips", "  paths (array of any, required): ", "fs_exec", "fs_vcs_diff", "fs_undo"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--tool-help lacks %q", want)
		}
	}
	if args < 100 {
		t.Errorf("--tool-help lists %d arguments; the parsing above found too few to mean anything", args)
	}
}
