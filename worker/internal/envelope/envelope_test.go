package envelope

import (
	"reflect"
	"strings"
	"testing"
)

// A patch as models write it: an added file, an update with several
// anchored chunks and an end-of-file chunk, a move, a deletion, blank
// separator lines and CRLF line endings of the patch itself.
func TestParseModelPatch(t *testing.T) {
	patch := strings.Join([]string{
		"",
		"*** Begin Patch",
		"*** Add File: docs/new.md",
		"+# New",
		"+",
		"+text",
		"",
		"*** Update File: src/app.py",
		"@@ class App:",
		"@@     def run(self):",
		"-        return 1",
		"+        return 2",
		"@@ def main():",
		" ",
		"-    App().run()",
		"+    print(App().run())",
		"*** End of File",
		"*** Update File: old/name.txt\r",
		"*** Move to: new/name.txt\r",
		"@@\r",
		" keep\r",
		"+added\r",
		"*** Delete File: gone.txt",
		"*** End Patch",
		"",
	}, "\n")
	got, err := Parse([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Op: Add, Path: "docs/new.md", Lines: []string{"# New", "", "text"}, Line: 3},
		{Op: Update, Path: "src/app.py", Line: 8, Chunks: []Chunk{
			{Anchors: []string{"class App:", "    def run(self):"}, Old: []string{"        return 1"}, New: []string{"        return 2"}, Line: 9},
			{Anchors: []string{"def main():"}, Old: []string{"", "    App().run()"}, New: []string{"", "    print(App().run())"}, EOF: true, Line: 13},
		}},
		{Op: Update, Path: "old/name.txt", MoveTo: "new/name.txt", Line: 18, Chunks: []Chunk{
			{Anchors: []string{""}, Old: []string{"keep"}, New: []string{"keep", "added"}, Line: 20},
		}},
		{Op: Delete, Path: "gone.txt", Line: 23},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%#v\nwant\n%#v", got, want)
	}
}

func TestParseFirstChunkWithoutAnchor(t *testing.T) {
	got, err := Parse([]byte("*** Begin Patch\n*** Update File: a\n-x\n+y\n*** End Patch"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Chunk{{Old: []string{"x"}, New: []string{"y"}, Line: 3}}
	if !reflect.DeepEqual(got[0].Chunks, want) {
		t.Errorf("chunks = %#v, want %#v", got[0].Chunks, want)
	}
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, patch, want string
		line              int
	}{
		{"no begin", "*** Update File: a\n-x\n*** End Patch", "must start with", 1},
		{"no end", "*** Begin Patch\n*** Update File: a\n-x\n+y", "must end with", 4},
		{"only markers", "*** Begin Patch\n*** End Patch", "names no file", 2},
		{"unknown section", "*** Begin Patch\n*** Rename File: a\n*** End Patch", "is not a file section", 2},
		{"no path", "*** Begin Patch\n*** Delete File: \n*** End Patch", "names no path", 2},
		{"add without plus", "*** Begin Patch\n*** Add File: a\n+x\ny\n*** End Patch", "every line starts with", 4},
		{"delete with lines", "*** Begin Patch\n*** Delete File: a\n-x\n*** End Patch", "nothing may follow", 3},
		{"empty update", "*** Begin Patch\n*** Update File: a\n*** End Patch", "changes nothing", 2},
		{"empty chunk", "*** Begin Patch\n*** Update File: a\n@@ f\n*** End Patch", "has no lines", 3},
		{"bad line", "*** Begin Patch\n*** Update File: a\n@@\n x\n?y\n*** End Patch", "starts with", 5},
		{"second chunk without @@", "*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End of File\n-y\n*** End Patch", "followed by", 6},
		{"eof first", "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch", "must end a chunk", 3},
		{"stray marker", "*** Begin Patch\n*** Update File: a\n-x\n*** Move to: b\n*** End Patch", "is not a marker", 4},
	} {
		_, err := Parse([]byte(tc.patch))
		e, ok := err.(*Error)
		if !ok || !strings.Contains(e.Msg, tc.want) || e.Line != tc.line {
			t.Errorf("%s: Parse = %v, want line %d: ...%s...", tc.name, err, tc.line, tc.want)
		}
	}
}

func TestIs(t *testing.T) {
	for in, want := range map[string]bool{
		"\n  \n*** Begin Patch\n": true,
		"*** Begin Patch":         true,
		"--- a/x\n+++ b/x\n":      false,
		"":                        false,
		"x\n*** Begin Patch\n":    false,
	} {
		if got := Is([]byte(in)); got != want {
			t.Errorf("Is(%q) = %v, want %v", in, got, want)
		}
	}
}

// Many blank lines cost one scan: a long run of blank lines inside an
// added file, then the end.
func TestParseBlankRun(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a\n+x\n" + strings.Repeat("\n", 200000) + "*** End Patch\n"
	got, err := Parse([]byte(patch))
	if err != nil || len(got) != 1 || len(got[0].Lines) != 1 {
		t.Fatalf("Parse = %v, %v", got, err)
	}
}
