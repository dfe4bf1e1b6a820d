package sandbox

import "testing"

// A path protected literally covers itself and what lies beneath it, its
// bytes never read as a glob; AbovePath holds for each directory on the
// way to it; "" protects the whole root.
func TestRulesWithPaths(t *testing.T) {
	r, err := Policy{}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	r = r.WithPaths([]string{"h/*", "x/[a]"})
	for rel, want := range map[string]bool{
		"h/*": true, "h/*/pre-commit": true, "h/a": false, "h": false, "x/[a]": true, "x/a": false, "": false,
	} {
		if _, got := r.Protected(rel); got != want {
			t.Errorf("Protected(%q) = %v, want %v", rel, got, want)
		}
	}
	for rel, want := range map[string]bool{"": true, "h": true, "x": true, "h/*": false, "hh": false, "y": false} {
		if got := r.AbovePath(rel); got != want {
			t.Errorf("AbovePath(%q) = %v, want %v", rel, got, want)
		}
	}
	if r.Empty() || !r.Protects() {
		t.Error("literal paths alone count as a policy")
	}
	all := r.WithPaths([]string{""})
	if _, ok := all.Protected("any/thing"); !ok {
		t.Error(`"" does not protect the whole root`)
	}
}
