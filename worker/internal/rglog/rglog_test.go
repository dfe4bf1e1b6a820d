package rglog

import (
	"bytes"
	"maps"
	"slices"
	"testing"
)

// The log's lines as rg 13 writes them: a special entry's line is known
// by the subject mark after its name and judges nothing, a name holding
// the mark is still skipped by its rule, a name with a newline joins its
// record, and a lossy name judges by its lossy form.
func TestLogLines(t *testing.T) {
	l := NewLog()
	const pre = "DEBUG|rg::subject|crates/core/subject.rs:74: ignoring ./"
	const tail = "file type: Some(FileType(FileType { mode: 40960 })), metadata: Ok(Metadata { .. })"
	const walk = "DEBUG|ignore::walk|walk.rs:1741: ignoring ./"
	l.Line([]byte(pre + "a/l" + SubjectMark + tail))
	l.Line([]byte(pre + "a/x" + SubjectMark + "y" + SubjectMark + tail))
	l.Line([]byte(walk + "a/.m" + SubjectMark + "z: Ignore(IgnoreMatch(Hidden))"))
	l.Line([]byte(walk + "a/odd"))
	l.Line([]byte("name: Ignore(IgnoreMatch(Hidden))"))
	l.Line([]byte(walk + "a/bad\uFFFDname: Ignore(IgnoreMatch(Hidden))"))
	want := map[string]bool{"a/.m" + SubjectMark + "z": true, "a/odd\nname": true, "a/bad\uFFFDname": true}
	if !maps.Equal(l.skipped, want) {
		t.Errorf("skipped %q, want %q", slices.Sorted(maps.Keys(l.skipped)), slices.Sorted(maps.Keys(want)))
	}
	for _, p := range []string{"a/odd\nname/f", "a/bad\xffname", "a/bad\xfename/g"} {
		if !l.SkippedOrUnder(p) {
			t.Errorf("%q not skipped", p)
		}
	}
	// Through the splitter, a path with two newlines (in two names) is one
	// record, and rg's own message stays apart.
	var rest bytes.Buffer
	d := &Splitter{Debug: l.Line, Rest: &rest}
	d.Write([]byte(walk + "b/one\ntwo/three\nfour: Ignore(IgnoreMatch(Hidden))\nrg: b/x: Permission denied\n"))
	if !l.skipped["b/one\ntwo/three\nfour"] || rest.String() != "rg: b/x: Permission denied\n" {
		t.Errorf("skipped %q, rest %q", slices.Sorted(maps.Keys(l.skipped)), rest.String())
	}
}
