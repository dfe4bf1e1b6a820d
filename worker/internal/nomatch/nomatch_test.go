package nomatch

import "testing"

// Find names the first normalisation under which the text occurs, in
// order, and else the longest prefix that occurs; nothing for text with
// no resemblance.
func TestFind(t *testing.T) {
	data := []byte("one\r\ntwo\n\tFunc  Main() {\n}\n")
	for _, c := range []struct {
		text, differs string
		line, offset  int64
		matched       int64
	}{
		{"one\ntwo", "line_endings", 1, 0, 0},
		{"Func Main()", "whitespace", 3, 10, 0},
		{"FUNC  MAIN", "case", 3, 10, 0},
		{"two func main", "whitespace_and_case", 2, 5, 0},
		{"two\n\tFunc  Minor", "content", 2, 5, 12},
	} {
		n := Find(data, []byte(c.text))
		if n == nil {
			t.Errorf("Find(%q) = nil, want %s", c.text, c.differs)
			continue
		}
		if n.Differs != c.differs || n.LineNumber != c.line || n.Offset != c.offset || n.MatchedBytes != c.matched {
			t.Errorf("Find(%q) = %s line %d offset %d matched %d, want %s line %d offset %d matched %d",
				c.text, n.Differs, n.LineNumber, n.Offset, n.MatchedBytes, c.differs, c.line, c.offset, c.matched)
		}
	}
	if n := Find(data, []byte("zzz")); n != nil {
		t.Errorf("Find(%q) = %v, want nil", "zzz", n)
	}
}
