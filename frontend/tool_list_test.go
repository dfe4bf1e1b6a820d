package frontend

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fsmcp/fsmcp/frontend/fronttest"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

func TestListSortedWithTypes(t *testing.T) {
	root, _ := fronttest.Tree(t)
	s := start(t, root)
	r := s.wantOK("fs_list", map[string]any{"path": ""})
	entries := r.Doc["entries"].([]any)
	var names []string
	types := map[string]string{}
	for _, e := range entries {
		m := e.(map[string]any)
		names = append(names, m["name"].(string))
		types[m["name"].(string)] = m["type"].(string)
		if _, ok := m["sha256"]; ok {
			t.Errorf("fs_list hashed %v", m)
		}
	}
	want := []string{"a.txt", "abs_in", "dangling", "dirlink_out", "fifo", "link_in", "link_out", "sub"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("fs_list names = %v, want %v", names, want)
	}
	if types["sub"] != "directory" || types["fifo"] != "fifo" || types["link_out"] != "symlink" || types["a.txt"] != "file" {
		t.Errorf("fs_list types = %v", types)
	}
	s.wantErr("fs_list", map[string]any{"path": "a.txt"}, "not_a_directory")
	s.wantErr("fs_list", map[string]any{"cursor": "!!"}, "invalid_argument")
	// A symlink to a directory inside the root lists that directory.
	if err := os.Symlink("sub", filepath.Join(root, "sublink")); err != nil {
		t.Fatal(err)
	}
	r = s.wantOK("fs_list", map[string]any{"path": "sublink"})
	if !strings.Contains(r.Text, `"b.txt"`) {
		t.Errorf("fs_list(sublink) = %s", r.Text)
	}
}

// fs_list cursors walk a 5,000-entry directory losslessly.
func TestListContinuation(t *testing.T) {
	root, _ := fronttest.Tree(t)
	dir := filepath.Join(root, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{}
	for i := range 5000 {
		name := fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", i%40))
		want = append(want, name)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(want)
	const max = 8192
	s := start(t, root, "--max-response-bytes", fmt.Sprint(max))
	var got []string
	args := map[string]any{"path": "many"}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("too many pages")
		}
		r := s.wantOK("fs_list", args)
		if len(r.Text) > max {
			t.Fatalf("reply of %d bytes exceeds %d", len(r.Text), max)
		}
		for _, e := range r.Doc["entries"].([]any) {
			got = append(got, e.(map[string]any)["name"].(string))
		}
		if r.Doc["truncated"] != true {
			break
		}
		args = map[string]any{"path": "many", "cursor": r.Str("cursor")}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed %d names, want %d, in order", len(got), len(want))
	}
}

// Names that are not UTF-8 are listed as name_base64 and addressable with
// path_base64.
func TestNonUTF8Names(t *testing.T) {
	root, _ := fronttest.Tree(t)
	name := "bad\xff\xfename"
	if err := os.WriteFile(filepath.Join(root, name), []byte("raw"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, root)
	r := s.wantOK("fs_list", map[string]any{"path": ""})
	b64 := base64.StdEncoding.EncodeToString([]byte(name))
	found := false
	for _, e := range r.Doc["entries"].([]any) {
		m := e.(map[string]any)
		if m["name_base64"] == b64 {
			found = true
			if _, ok := m["name"]; ok {
				t.Errorf("entry has both name and name_base64: %v", m)
			}
		}
	}
	if !found {
		t.Fatalf("fs_list does not list %q as name_base64: %s", name, r.Text)
	}
	r = s.wantOK("fs_read", map[string]any{"path_base64": b64})
	if r.Str("content") != "raw" {
		t.Errorf("fs_read(path_base64) = %s", r.Text)
	}
	r = s.wantOK("fs_stat", map[string]any{"path_base64": b64})
	if r.Str("path_base64") != b64 {
		t.Errorf("fs_stat(path_base64) = %s", r.Text)
	}
	s.wantErr("fs_stat", map[string]any{"path_base64": "%%%"}, "invalid_argument")
	s.wantErr("fs_stat", map[string]any{"path": "a.txt", "path_base64": b64}, "invalid_argument")
}

// appendTime writes what time.Format writes with timeLayout, for every
// time an int64 of nanoseconds holds.
func TestListTimeFormat(t *testing.T) {
	cases := []int64{0, 1, -1, 999_999_999, -999_999_999, 1_000_000_000, -1_000_000_000,
		1764590000_123456789, 253402300799_999999999 / 1000, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		cases = append(cases, int64(r.Uint64()))
	}
	for _, ns := range cases {
		want := time.Unix(0, ns).UTC().Format(timeLayout)
		if got := string(appendTime([]byte("x"), ns)); got != "x"+want {
			t.Fatalf("appendTime(%d) = %q, want %q", ns, got[1:], want)
		}
	}
}

// appendEntry writes what the name and entryFields builders write, for
// every type, UTF-8 and other names, and every mode bit.
func TestListEntryRendering(t *testing.T) {
	names := [][]byte{[]byte("a.txt"), []byte("quote\"back\\slash\ttab\x01"), []byte("bad\xff\xfe"), []byte("é日本")}
	for tp := range fsmcpv1.FileType_name {
		for _, name := range names {
			for _, mode := range []uint32{0, 0o644, 0o7777, 0o4755, 0o100644} {
				e := &fsmcpv1.Entry{Name: name, Type: fsmcpv1.FileType(tp), Size: int64(tp) * 4099, MtimeUnixNano: 1764590000_123456789, Mode: mode}
				want := string(entryFields(newObj().name("name", e.GetName()), e).bytes())
				if got := string(appendEntry(nil, e.Name, e.Type, e.Size, e.MtimeUnixNano, e.Mode)); got != want {
					t.Errorf("appendEntry = %s, want %s", got, want)
				}
			}
		}
	}
}

// formatMode writes what fmt's %04o writes of the permission bits, for
// every mode with file-type bits above them; typeName gives the enum's
// own name, lowered, for every declared type and an undeclared one.
func TestModeAndTypeNames(t *testing.T) {
	for m := uint32(0); m < 1<<17; m++ {
		if got, want := formatMode(m), fmt.Sprintf("%04o", m&0o7777); got != want {
			t.Fatalf("formatMode(%o) = %q, want %q", m, got, want)
		}
	}
	for _, v := range append(slices.Collect(maps.Keys(fsmcpv1.FileType_name)), 99) {
		typ := fsmcpv1.FileType(v)
		if got, want := typeName(typ), strings.ToLower(strings.TrimPrefix(typ.String(), "FILE_TYPE_")); got != want {
			t.Fatalf("typeName(%d) = %q, want %q", v, got, want)
		}
	}
}
