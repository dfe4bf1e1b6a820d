package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rg's advice about its own flags becomes advice about the tool's
// options: the client cannot pass --multiline or --pcre2.
func TestContactRGHintsTranslated(t *testing.T) {
	root, _ := tree(t)
	s := start(t, root)
	for _, c := range []struct{ pattern, want, rgFlag string }{
		{`a\nb`, "fs_grep matches one line at a time", "--multiline"},
		{`(?=a)b`, "without look-around or backreferences", "--pcre2"},
	} {
		r := s.wantErr("fs_grep", map[string]any{"path": "", "pattern": c.pattern}, "invalid_argument")
		msg := r.doc["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, c.want) || strings.Contains(msg, c.rgFlag) {
			t.Errorf("fs_grep %q: message %q, want %q and no %s", c.pattern, msg, c.want, c.rgFlag)
		}
	}
}

// Without --max-response-bytes a reply is at most 65536 bytes: a read of
// a larger file is cut there and says how to continue.
func TestContactDefaultReplyBound(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big.txt"), []byte(strings.Repeat("0123456789abcde\n", 16<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantOK("fs_read", map[string]any{"path": "big.txt"})
	if len(r.text) > 65536 || len(r.text) < 60000 || r.doc["truncated"] != true || r.num("next_offset") != r.num("length") {
		t.Errorf("fs_read of 256 KiB: reply of %d bytes (truncated %v, next_offset %d, length %d), want at most 65536, cut near it",
			len(r.text), r.doc["truncated"], r.num("next_offset"), r.num("length"))
	}
}
