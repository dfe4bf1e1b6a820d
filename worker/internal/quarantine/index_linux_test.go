package quarantine

import (
	"os"
	"path/filepath"
	"testing"
)

// The key is made once and read back the same; the index replays adds,
// deletions and spent ids, stops at a torn last line, and keeps the
// highest id given across a rewrite even when its entry is gone.
func TestIndexAndKey(t *testing.T) {
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fd := int(d.Fd())
	k1, err := Key(fd)
	if err != nil {
		t.Fatal(err)
	}
	if k2, err := Key(fd); err != nil || k2 != k1 {
		t.Fatalf("second Key = %x, %v; want %x", k2, err, k1)
	}
	f, err := Rewrite(fd, &State{Used: map[uint64]bool{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{
		{Op: OpAdd, ID: 1, Bytes: 5, Parts: []Part{{Name: "q1", Path: []byte("a")}}},
		{Op: OpAdd, ID: 2, Parts: []Part{{Path: []byte("b")}}},
		{Op: OpUsed, ID: 1},
		{Op: OpDel, ID: 1},
		{Op: OpAdd, ID: 3},
		{Op: OpDel, ID: 3},
	} {
		if err := Append(f, r, false); err != nil {
			t.Fatal(err)
		}
	}
	f.Write([]byte(`{"op":"add","id":9`))
	f.Close()
	st, err := Load(fd)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Entries) != 1 || st.Entries[0].ID != 2 || !st.Used[1] || st.MaxID != 3 {
		t.Fatalf("Load = %+v", st)
	}
	f, err = Rewrite(fd, st)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	again, err := Load(fd)
	if err != nil || len(again.Entries) != 1 || again.MaxID != 3 || !again.Used[1] {
		t.Fatalf("after a rewrite: %+v, %v", again, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, KeyName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
}
