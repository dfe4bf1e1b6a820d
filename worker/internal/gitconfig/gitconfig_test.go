package gitconfig

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitList is what the host's git reads from the file data: "key=value"
// lines (a valueless variable as "key"), or ok false when git refuses it.
func gitList(t *testing.T, data string) ([]string, bool) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "config", "--file", f, "--no-includes", "--list", "-z")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	var got []string
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		k, v, hasValue := strings.Cut(rec, "\n")
		if hasValue {
			got = append(got, k+"="+v)
		} else {
			got = append(got, k)
		}
	}
	return got, true
}

func ours(vars []Var) []string {
	var got []string
	for _, v := range vars {
		if v.NoValue {
			got = append(got, v.Key)
		} else {
			got = append(got, v.Key+"="+v.Value)
		}
	}
	return got
}

// gitCases are configuration texts that git reads, or refuses.
var gitCases = []string{
	"[core]\n\thooksPath = .githooks\n",
	"[Core]\n\tHooksPath=x\n",
	"[core] hooksPath = same-line\n",
	"[core]\nhooksPath = \"  quoted  \"  # comment\n",
	"[core]\nhooksPath = a\\\n  b\n",
	"[core]\nhooksPath = \"a;b#c\" ; tail\n",
	"[core]\nhooksPath = a\\tb\\\\c\\\"d\\ne\n",
	"[core]\nhooksPath = a\\qb\n",
	"[core]\nhooksPath = \"unterminated\n",
	"[core]\r\nhooksPath = crlf\r\n",
	"[core]\nbare\n",
	"[core]\n  x  =  a \t  b  \n",
	"[include]\n\tpath = ../shared.cfg\n",
	"[includeIf \"gitdir:/x/\"]\n\tpath = i.cfg\n",
	"[includeIf \"onbranch:Main\"]\npath=b\n",
	"[remote \"Or\\\"ig\\\\in\"]\nurl = u\n",
	"[remote \"a\\bc\"]\nurl = u\n",
	"[Sec.Sub]\nk = v\n",
	"[sec \"unterminated]\nk = v\n",
	"[sec \"x\" ]\nk = v\n",
	"[se c]\nk = v\n",
	"[sec]\n1k = v\n",
	"[sec]\nk_x = v\n",
	"[sec]\nk ! v\n",
	"[]\nk = v\n",
	"[sec\n",
	"\xef\xbb\xbf[core]\nk = bom\n",
	"# only a comment\n; another\n",
	"[core]\nk = last-line-no-newline",
	"[core]\nk = v\n[core]\nk = w\n",
	"[a]\nk\n[b \"s\"]\nk=1\n[a.b]\nk=2\n",
	"[core]\n\tk = \"a\"\"b\" c \"d  e\"\n",
	"[core]\n\tk = \\\n",
	"[core]\n\tk-2 = x\n",
}

// TestParseAgreesWithGit: for every case, Parse reads what the host's git
// reads, and refuses what git refuses.
func TestParseAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	for _, data := range gitCases {
		want, gitOK := gitList(t, data)
		vars, err := Parse([]byte(data))
		if gitOK != (err == nil) {
			t.Errorf("Parse(%q): err %v, but git ok=%v (%q)", data, err, gitOK, want)
			continue
		}
		if got := ours(vars); gitOK && strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("Parse(%q) = %q, git reads %q", data, got, want)
		}
	}
}

func TestVarParts(t *testing.T) {
	vars, err := Parse([]byte("[includeIf \"gitdir:a.b/\"]\npath = x\n[core]\nhooksPath = h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v := vars[0]; v.Section() != "includeif" || v.Subsection() != "gitdir:a.b/" || v.Name() != "path" || v.Line != 2 {
		t.Errorf("%+v: section %q subsection %q name %q", v, v.Section(), v.Subsection(), v.Name())
	}
	if v := vars[1]; v.Section() != "core" || v.Subsection() != "" || v.Name() != "hookspath" || v.Line != 4 {
		t.Errorf("%+v: section %q subsection %q name %q", v, v.Section(), v.Subsection(), v.Name())
	}
}

// FuzzParseAgreesWithGit runs the comparison on generated texts.
func FuzzParseAgreesWithGit(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Skip("git not installed")
	}
	for _, c := range gitCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if strings.IndexByte(data, 0) >= 0 {
			return // git reads NUL bytes as text; Parse refuses them
		}
		want, gitOK := gitList(t, data)
		vars, err := Parse([]byte(data))
		if gitOK != (err == nil) {
			t.Fatalf("Parse(%q): err %v, but git ok=%v (%q)", data, err, gitOK, want)
		}
		if got := ours(vars); gitOK && strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("Parse(%q) = %q, git reads %q", data, got, want)
		}
	})
}
