package hashcache

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// PutPlaced makes an entry only when the placed file is the staged one,
// unwritten since (same size and mtime), and its ctime is later than its
// mtime; Put only when the file's ctime was settle old when hashing began,
// even if it is by the time hashing ends.
func TestEntryRules(t *testing.T) {
	now := time.Now()
	stat := func(ino uint64, size int64, mtime, ctime time.Time) *unix.Stat_t {
		return &unix.Stat_t{Dev: 1, Ino: ino, Size: size,
			Mtim: unix.NsecToTimespec(mtime.UnixNano()), Ctim: unix.NsecToTimespec(ctime.UnixNano())}
	}
	m := now.Add(-time.Millisecond)
	staged := stat(7, 100, m, m)
	for _, tc := range []struct {
		name   string
		placed *unix.Stat_t
		cached bool
	}{
		{"renamed later", stat(7, 100, m, now), true},
		{"ctime equals mtime", stat(7, 100, m, m), false},
		{"written since", stat(7, 100, now, now.Add(time.Microsecond)), false},
		{"size changed", stat(7, 101, m, now), false},
		{"another inode", stat(8, 100, m, now), false},
	} {
		c := New()
		c.PutPlaced(staged, tc.placed, Sum{Hex: "s"})
		if _, ok := c.Get(KeyOf(tc.placed)); ok != tc.cached {
			t.Errorf("putPlaced %s: cached %v, want %v", tc.name, ok, tc.cached)
		}
	}
	for _, tc := range []struct {
		name         string
		ctime, start time.Time
		cached       bool
	}{
		{"settled before hashing", now.Add(-2 * time.Second), now, true},
		{"young when hashing began", now.Add(-2 * time.Second), now.Add(-1500 * time.Millisecond), false},
		{"young", now.Add(-100 * time.Millisecond), now, false},
	} {
		c := New()
		st := stat(9, 100, tc.ctime, tc.ctime)
		c.Put(st, st, tc.start, Sum{Hex: "s"})
		if _, ok := c.Get(KeyOf(st)); ok != tc.cached {
			t.Errorf("put %s: cached %v, want %v", tc.name, ok, tc.cached)
		}
	}
}
