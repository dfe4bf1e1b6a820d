package fileio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// CopyRange copies exactly the range asked, into the place asked;
// HashRange hashes exactly its range; CountLines counts the newlines of
// the prefix. The data spans several buffers.
func TestRanges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcde\n"), 50000) // 800,000 bytes
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sf, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	df, err := os.Create(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	const soff, doff, n = 1000, 7, 700000
	if err := CopyRange(ctx, sf, df, soff, doff, n); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(df.Name())
	if err != nil {
		t.Fatal(err)
	}
	if want := append(make([]byte, doff), data[soff:soff+n]...); !bytes.Equal(got, want) {
		t.Errorf("CopyRange: %d bytes, want %d, equal %v", len(got), len(want), bytes.Equal(got, want))
	}
	h := sha256.New()
	if err := HashRange(ctx, h, sf, soff, soff+n); err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(data[soff : soff+n]); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Errorf("HashRange: wrong sum")
	}
	if err := HashRange(ctx, h, sf, 0, int64(len(data))+1); err == nil {
		t.Errorf("HashRange past the end: no error")
	}
	if c, err := CountLines(ctx, sf, 16*300+5); c != 300 || err != nil {
		t.Errorf("CountLines = %d, %v, want 300", c, err)
	}
}
