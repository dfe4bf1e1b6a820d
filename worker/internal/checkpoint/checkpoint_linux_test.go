package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

func stateDir(t *testing.T) (string, int) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return dir, int(f.Fd())
}

// A record reads back as written; one altered on disk does not verify,
// and a partial one left by a crash is removed by List.
func TestRecordRoundTrip(t *testing.T) {
	dir, fd := stateDir(t)
	r := &Record{Info: Info{ID: ID(42), Label: "l", Created: 42, Files: 1, Bytes: 3, TreeSHA: "t", Seq: 7},
		Entries: []Entry{{Path: []byte("b\xff"), Type: File, Mode: 0o644, Size: 3, SHA: "s"}, {Path: []byte("a"), Type: Dir, Mode: 0o755}}}
	r.Sort()
	if err := Write(fd, r); err != nil {
		t.Fatal(err)
	}
	got, err := Read(fd, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Info != r.Info || len(got.Entries) != 2 || string(got.Entries[1].Path) != "b\xff" || got.Lookup()["a"].Mode != 0o755 {
		t.Fatalf("Read = %+v, want %+v", got, r)
	}
	if err := os.WriteFile(filepath.Join(dir, partial+ID(43)), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	infos, err := List(fd)
	if err != nil || len(infos) != 1 || *infos[0] != r.Info {
		t.Fatalf("List = %v, %v", infos, err)
	}
	if _, err := os.Stat(filepath.Join(dir, partial+ID(43))); !os.IsNotExist(err) {
		t.Error("List left a partial record")
	}
	p := filepath.Join(dir, Prefix+r.ID)
	b, _ := os.ReadFile(p)
	b[len(b)-3] ^= 1
	os.WriteFile(p, b, 0o600)
	if _, err := Read(fd, r.ID); err == nil {
		t.Fatal("an altered record verified")
	}
	if _, err := Read(fd, "../x"); !os.IsNotExist(err) {
		t.Fatalf("Read of an id that names no record = %v", err)
	}
}

// The touch log's last record for a path wins, and a tree record covers
// every name beneath it until a later record of that name; records before
// the checkpoint do not count.
func TestTouchLeft(t *testing.T) {
	_, fd := stateDir(t)
	f, err := OpenTouch(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := AppendTouch(f, []Touch{
		{Path: []byte("old"), Type: File, SHA: "0", Time: 1},
		{Path: []byte("d/f"), Type: File, SHA: "1", Time: 10},
		{Path: []byte("d"), Type: Absent, Tree: true, Time: 11},
		{Path: []byte("d/g"), Type: File, SHA: "2", Time: 12},
		{Path: []byte("e"), Type: Dir, Time: 13},
	}); err != nil {
		t.Fatal(err)
	}
	ts, err := ReadTouch(fd, 5)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"d/f": "-", "d/g": "f2", "d": "-", "e": "d", "old": "none", "x": "none"} {
		got := "none"
		if r, ok := ts.Left(path); ok {
			got = string(r.Type) + r.SHA
		}
		if got != want {
			t.Errorf("Left(%q) = %s, want %s", path, got, want)
		}
	}
}
