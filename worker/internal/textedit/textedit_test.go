package textedit

import "testing"

func TestEndings(t *testing.T) {
	for in, want := range map[string][2]int{
		"":              {0, 0},
		"a\r\nb\r\n":    {2, 0},
		"a\nb\n":        {0, 2},
		"a\r\nb\nc":     {1, 1},
		"\r\r\n\n\r":    {1, 1},
		"no line end\r": {0, 0},
	} {
		crlf, lf := Endings([]byte(in))
		if crlf != want[0] || lf != want[1] {
			t.Errorf("Endings(%q) = %d, %d, want %d, %d", in, crlf, lf, want[0], want[1])
		}
	}
	if !AllCRLF([]byte("a\r\nb")) || AllCRLF([]byte("a\r\nb\n")) || AllCRLF([]byte("ab")) {
		t.Error("AllCRLF misjudged")
	}
}

func TestCRLF(t *testing.T) {
	for in, want := range map[string]string{
		"a\nb\n":   "a\r\nb\r\n",
		"a\r\nb\n": "a\r\nb\r\n",
		"\n":       "\r\n",
		"ab":       "ab",
	} {
		if got := string(CRLF([]byte(in))); got != want {
			t.Errorf("CRLF(%q) = %q, want %q", in, got, want)
		}
	}
	if got := string(Lines([]string{"a", ""}, "\r\n")); got != "a\r\n\r\n" {
		t.Errorf("Lines = %q", got)
	}
}
