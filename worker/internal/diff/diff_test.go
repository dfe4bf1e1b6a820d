package diff

import (
	"fmt"
	"strings"
	"testing"
)

// Equal sides give no diff; a created empty file gives the labels only; a
// change deep in a window is numbered from the file's start, with three
// lines of context, however long the common prefix.
func TestUnified(t *testing.T) {
	if u, err := Unified("f", []byte("a\n"), []byte("a\n"), true, true, 0); u != nil || err != nil {
		t.Errorf("Unified(equal) = %q, %v, want nothing", u, err)
	}
	if u, _ := Unified("f", nil, nil, false, true, 0); string(u) != "--- /dev/null\n+++ b/f\n" {
		t.Errorf("Unified(created empty) = %q", u)
	}
	var old, new strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&old, "line %d\n", i)
		if i == 50 {
			new.WriteString("changed\n")
		} else {
			fmt.Fprintf(&new, "line %d\n", i)
		}
	}
	u, err := Unified("f", []byte(old.String()), []byte(new.String()), true, true, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := "--- a/f\n+++ b/f\n@@ -57,7 +57,7 @@\n line 47\n line 48\n line 49\n-line 50\n+changed\n line 51\n line 52\n line 53\n"
	if string(u) != want {
		t.Errorf("Unified(one line changed) =\n%s\nwant\n%s", u, want)
	}
}
