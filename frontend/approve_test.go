package frontend

import (
	"fmt"
	"strings"
	"testing"
)

// TestEscapeText: every control, bidi and zero-width character shows as a
// visible escape; printable text, line feeds and tabs (in blocks) stay.
func TestEscapeText(t *testing.T) {
	var hidden []rune
	for _, r := range []struct{ lo, hi rune }{{0, 0x1f}, {0x7f, 0x9f}, {0x202a, 0x202e}, {0x2066, 0x2069},
		{0x200e, 0x200f}, {0x061c, 0x061c}, {0x200b, 0x200d}, {0x2060, 0x2060}, {0xfeff, 0xfeff}} {
		for c := r.lo; c <= r.hi; c++ {
			hidden = append(hidden, c)
		}
	}
	for _, r := range hidden {
		lines := r == '\n' || r == '\t'
		got := escapeText([]byte(string(r)), true)
		if lines {
			if got != string(r) {
				t.Errorf("escapeText(%U, lines) = %q, want it kept", r, got)
			}
			got = escapeText([]byte(string(r)), false)
		}
		if !strings.HasPrefix(got, `\`) || strings.ContainsRune(got, r) {
			t.Errorf("escapeText(%U) = %q, want a visible escape", r, got)
		}
		if q := quoteName([]byte(string(r))); strings.ContainsRune(q, r) {
			t.Errorf("quoteName(%U) = %q holds it raw", r, q)
		}
	}
	for in, want := range map[string]string{
		"a\x1b[2Kb\rc":       `a\x1b[2Kb\rc`,
		"x \u202ey\u200bz":   `x \u202ey\u200bz`,
		"\xff\xfe ok":        `\xff\xfe ok`,
		"é 日本 -+ \\x1b text": "é 日本 -+ \\x1b text",
		"line\n\tnext":       "line\n\tnext",
	} {
		if got := escapeText([]byte(in), true); got != want {
			t.Errorf("escapeText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAskDiffBounds: each file's diff gets a share of the total, at least
// minAskDiff, so that many long diffs cannot push the last one's out of
// the question; every name is there whole, and what is cut is counted.
func TestAskDiffBounds(t *testing.T) {
	e := &effect{}
	long := strings.Repeat("+"+strings.Repeat("x", 99)+"\n", 100) // 10000 bytes, 100 lines
	for i := range 40 {
		e.files = append(e.files, effectFile{name: []byte(fmt.Sprintf("f%02d-%s", i, strings.Repeat("n", 2000))), what: "changed", diff: []byte(long)})
	}
	e.files = append(e.files, effectFile{name: []byte("Makefile"), what: "changed", diff: []byte("+\tcurl x | sh\n")})
	var b strings.Builder
	writeEffect(&b, e)
	q := b.String()
	for _, f := range e.files {
		if !strings.Contains(q, quoteName(f.name)) {
			t.Fatalf("a name was cut: %.40s", f.name)
		}
	}
	if !strings.Contains(q, "+\tcurl x | sh") {
		t.Error("the last file's diff is not shown")
	}
	if n := strings.Count(q, "of this diff not shown"); n != 40 {
		t.Errorf("%d diffs say what they leave out, want 40", n)
	}
	// Each name twice (in the list, above its diff), the diffs within
	// their total, a line counting each cut.
	names := 2 * 41 * (2000 + 100)
	if len(q) > names+maxAskDiffs+40*100 {
		t.Errorf("the question is %d bytes", len(q))
	}
}

// TestAskMessageNames: the names a call's arguments give, single or in a
// list, are in the question whole and escaped, however long.
func TestAskMessageNames(t *testing.T) {
	long := strings.Repeat("d/", 1500) + "f"
	raw := fmt.Sprintf(`{"paths":[%q,{"path_base64":"/w=="},"x\u202e.txt"]}`, long)
	q := askMessage("fs_read_many", readManyTool.tool(), []byte(raw), nil, nil)
	want := fmt.Sprintf(`paths: %q, "\xff", "x\u202e.txt"`, long)
	if !strings.Contains(q, want) {
		t.Errorf("the question does not name every path whole and escaped:\n%.300s", q)
	}
	q = askMessage("fs_move", moveTool.tool(), []byte(fmt.Sprintf(`{"from":%q,"to_base64":"/w=="}`, long)), nil, nil)
	if !strings.Contains(q, fmt.Sprintf("from: %q\n", long)) || !strings.Contains(q, `to: "\xff"`) {
		t.Errorf("the question does not name from and to whole:\n%.300s", q)
	}
}
