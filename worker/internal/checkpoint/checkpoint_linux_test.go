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

// Action names what brings each state back to the checkpoint's; Explains
// matches the tools' last record against what is there.
func TestActionAndExplains(t *testing.T) {
	f := &Entry{Type: File, Mode: 0o644, SHA: "1"}
	g := &Entry{Type: File, Mode: 0o644, SHA: "2"}
	x := &Entry{Type: File, Mode: 0o755, SHA: "1"}
	d := &Entry{Type: Dir, Mode: 0o755}
	e := &Entry{Type: Dir, Mode: 0o700}
	for _, c := range []struct {
		want, have *Entry
		action     string
	}{
		{nil, f, "delete"}, {nil, d, "rmdir"}, {f, nil, "create"}, {d, nil, "mkdir"}, {f, d, "type"},
		{d, e, "chmod"}, {d, d, ""}, {f, g, "restore"}, {f, x, "chmod"}, {f, f, ""},
	} {
		if got := Action(c.want, c.have); got != c.action {
			t.Errorf("Action(%v, %v) = %q, want %q", c.want, c.have, got, c.action)
		}
	}
	ts := &Touches{exact: map[string]touchAt{
		"f": {Touch{Type: File, SHA: "2"}, 0}, "gone": {Touch{Type: Absent}, 1}, "d": {Touch{Type: Dir}, 2}}, trees: map[string]int{}}
	for _, c := range []struct {
		path string
		have *Entry
		want bool
	}{{"f", g, true}, {"f", f, false}, {"gone", nil, true}, {"gone", f, false}, {"d", d, true}, {"none", f, false}, {"none", nil, false}} {
		if got := ts.Explains(c.path, c.have); got != c.want {
			t.Errorf("Explains(%q, %v) = %v, want %v", c.path, c.have, got, c.want)
		}
	}
	if !Within("a/b", "a") || Within("ab", "a") || !Within("x", "") || !Within("a", "a") {
		t.Error("Within")
	}
}
