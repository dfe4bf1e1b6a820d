package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Through the real binary, with structured content: fs_read with charset
// decodes a Shift-JIS file (offsets in its bytes, a page that ends inside
// a character stops before it) and refuses bytes that do not round-trip
// with the file offset; fs_replace with charset edits it leaving every
// other byte; fs_patch reads an envelope and says so.
func TestFormatsEndToEnd(t *testing.T) {
	root := t.TempDir()
	sjis := []byte("a\x93\xfa\x96\x7b\nb\n") // "a日本\nb\n"
	if err := os.WriteFile(filepath.Join(root, "jp.txt"), sjis, 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--structured-content")
	r := s.wantOK("fs_read", map[string]any{"path": "jp.txt", "charset": "shift_jis"})
	if r.str("content") != "a日本\nb\n" || r.str("charset") != "shift_jis" || r.num("length") != int64(len(sjis)) || r.num("size") != int64(len(sjis)) {
		t.Fatalf("fs_read = %s", r.text)
	}
	r = s.wantOK("fs_read", map[string]any{"path": "jp.txt", "charset": "shift_jis", "offset": 1, "length": 3})
	if r.str("content") != "日" || r.num("offset") != 1 || r.num("length") != 2 || r.num("next_offset") != 3 {
		t.Fatalf("fs_read of a range ending inside a character = %s", r.text)
	}
	// 0x93 0xfa is a character of EUC-KR (as UHC); 0x96 0x7b is not.
	r = s.wantErr("fs_read", map[string]any{"path": "jp.txt", "charset": "euc-kr", "offset": 1}, "invalid_argument")
	if e, _ := r.doc["error"].(map[string]any); e["offset"] != float64(3) {
		t.Fatalf("refusal without the file offset: %s", r.text)
	}
	r = s.wantOK("fs_replace", map[string]any{"path": "jp.txt", "charset": "shift_jis", "if_sha256": sha(sjis),
		"edits": []any{map[string]any{"old": "本", "new": "東京"}}})
	want := []byte("a\x93\xfa\x93\x8c\x8b\x9e\nb\n")
	if got := readFile(t, filepath.Join(root, "jp.txt")); !bytes.Equal(got, want) {
		t.Fatalf("after fs_replace, jp.txt = %q, want %q", got, want)
	}
	r = s.wantErr("fs_write", map[string]any{"path": "l1.txt", "charset": "latin1", "content": "ok €", "if_sha256": nil}, "invalid_argument")
	if e, _ := r.doc["error"].(map[string]any); e["offset"] != float64(3) {
		t.Fatalf("refusal without the text offset: %s", r.text)
	}
	patch := "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** Update File: jp.txt\n*** Move to: moved.txt\n@@\n b\n+c\n*** End Patch\n"
	r = s.wantOK("fs_patch", map[string]any{"patch": patch, "if_sha256": map[string]any{"new.txt": nil, "jp.txt": sha(want), "moved.txt": nil}})
	if r.str("format") != "envelope" {
		t.Fatalf("fs_patch = %s", r.text)
	}
	if got := readFile(t, filepath.Join(root, "moved.txt")); !bytes.Equal(got, append(want, "c\n"...)) {
		t.Fatalf("moved.txt = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "jp.txt")); !os.IsNotExist(err) {
		t.Fatalf("jp.txt still exists: %v", err)
	}
}
