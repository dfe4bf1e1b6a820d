package worker

import (
	"testing"
)

func TestDisplayPrefix(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{".", ""},
		{"sub", "sub"},
		{"sub/", "sub"},
		{"./sub//x/.", "sub/x"},
		{"sub/../x", "sub/../x"},
		{"..", ".."},
	} {
		if got := displayPrefix(c.in); got != c.want {
			t.Errorf("displayPrefix(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	dir := &searchTarget{prefix: "sub"}
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"./a.txt", "sub/a.txt", true},
		{"./x/" + tempPrefix + "1", "", false},
		{"./" + tempPrefix + "d/a", "", false},
		{"./x/a" + tempPrefix, "sub/x/a" + tempPrefix, true},
	} {
		got, ok := dir.display([]byte(c.in))
		if ok != c.ok || string(got) != c.want {
			t.Errorf("display(%q) = %q, %v, want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
