package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// A page long enough to be lstat'ed by several goroutines lists every
// entry once, in name order, with its own lstat, and the columns agree.
func TestListLongPageColumns(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 1500 {
		name := fmt.Sprintf("n%04d", (i*7919)%1500)
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, i%97), 0o600+os.FileMode(i%2)*0o44); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	want = append(want, "sub")
	slices.Sort(want)
	s := newTestService(t, dir)
	resp, err := s.List(context.Background(), &fsmcpv1.ListRequest{Path: []byte(""), MaxBytes: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.GetColumns()
	if resp.GetMore() || len(c.GetNameEnds()) != len(want) {
		t.Fatalf("listed %d entries (more %v), want %d", len(c.GetNameEnds()), resp.GetMore(), len(want))
	}
	start := uint32(0)
	for i, end := range c.GetNameEnds() {
		name := string(c.GetNames()[start:end])
		start = end
		if name != want[i] {
			t.Fatalf("entry %d is %q, want %q", i, name, want[i])
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st := toStat(fi)
		if c.GetSizes()[i] != st.Size || c.GetMtimesUnixNano()[i] != st.Mtim.Nano() || c.GetModes()[i] != st.Mode&0o7777 ||
			c.GetTypes()[i] != fileType(st.Mode) {
			t.Fatalf("entry %s: size %d mtime %d mode %o type %v, lstat says %d %d %o %v", name, c.GetSizes()[i],
				c.GetMtimesUnixNano()[i], c.GetModes()[i], c.GetTypes()[i], st.Size, st.Mtim.Nano(), st.Mode&0o7777, fileType(st.Mode))
		}
	}
}
