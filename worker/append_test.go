package worker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/appendlog"
)

func inoOf(t *testing.T, p string) (uint64, uint64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino, st.Nlink
}

// An append keeps the inode and a hard link (which sees the appended
// bytes), answers the new sha256, and a retry with the same precondition
// fails instead of writing twice.
func TestAppendInPlaceKeepsInodeAndLinks(t *testing.T) {
	s, dir := newWriteService(t)
	p, link := filepath.Join(dir, "log"), filepath.Join(dir, "link")
	wput(t, p, "one\n")
	if err := os.Link(p, link); err != nil {
		t.Fatal(err)
	}
	ino, _ := inoOf(t, p)
	sum, err := appendOnce(t, s, "log", wsum([]byte("one\n")), []byte("two\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sum != wsum([]byte("one\ntwo\n")) {
		t.Error("the reply's sha256 is not the file's")
	}
	if now, nlink := inoOf(t, p); now != ino || nlink != 2 {
		t.Errorf("inode %d (was %d), %d links, want the same inode and 2", now, ino, nlink)
	}
	if got := wcontent(t, link); got != "one\ntwo\n" {
		t.Errorf("the hard link holds %q", got)
	}
	_, err = appendOnce(t, s, "log", wsum([]byte("one\n")), []byte("two\n"))
	wantWriteCode(t, "retried append", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "one\ntwo\n" {
		t.Errorf("after the retry, the file holds %q", got)
	}
}

// Recovery from an append record left by a crash: a torn append (any
// size from the old to the new) is cut back to the old size; a completed
// one is kept; a file whose old bytes changed since, or that grew past
// the record, is left as it is. The slot is free afterwards.
func TestAppendRecovery(t *testing.T) {
	old, add := []byte("old content\n"), []byte("appended bytes\n")
	full := append(bytes.Clone(old), add...)
	for _, tc := range []struct {
		name       string
		file, want []byte
	}{
		{"nothing written", old, old},
		{"torn", full[:len(old)+5], old},
		{"complete", full, full},
		{"old bytes changed", append([]byte("OLD"), full[3:len(old)+5]...), append([]byte("OLD"), full[3:len(old)+5]...)},
		{"grew since", append(bytes.Clone(full), "more\n"...), append(bytes.Clone(full), "more\n"...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newWriteService(t)
			p := filepath.Join(dir, "log")
			wput(t, p, string(tc.file))
			ino, _ := inoOf(t, p)
			slot, err := s.appends.Take(int(s.state.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			rec := &appendlog.Record{RootDev: s.rootDev, RootIno: s.rootIno, Name: []byte("log"), Ino: ino,
				OldSize: int64(len(old)), OldSHA: wsum(old), NewSize: int64(len(full)), NewSHA: wsum(full)}
			if err := appendlog.Write(slot, rec); err != nil {
				t.Fatal(err)
			}
			slot.Close()
			s.appends.Free = nil
			if _, err := s.recoverJournals(""); err != nil {
				t.Fatal(err)
			}
			if got := wcontent(t, p); got != string(tc.want) {
				t.Errorf("log = %q, want %q", got, tc.want)
			}
			if len(s.appends.Free) != 1 {
				t.Fatalf("%d free slots after recovery, want 1", len(s.appends.Free))
			}
			if r, err := appendlog.Read(s.appends.Free[0]); r != nil || err != nil {
				t.Errorf("the slot still holds %v, %v", r, err)
			}
		})
	}
}

// Undo of an append cuts it off the same inode while the old bytes are
// unchanged; once they changed, it is precondition_failed and the file
// stays.
func TestAppendUndo(t *testing.T) {
	ctx := context.Background()
	s, root, _ := newQuarantineService(t, 1<<20)
	p := filepath.Join(root, "log")
	wput(t, p, "one\n")
	resp, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("log"), Content: []byte("two\n"), Append: true, IfSha256: wsum([]byte("one\n"))})
	if err != nil {
		t.Fatal(err)
	}
	// A later append does not stop the undo: the old bytes are intact.
	if _, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("log"), Content: []byte("three\n"), Append: true, IfSha256: resp.GetSha256()}); err != nil {
		t.Fatal(err)
	}
	ino, _ := inoOf(t, p)
	undoOf(t, s, resp.GetUndo())
	if got := wcontent(t, p); got != "one\n" {
		t.Errorf("after the undo, log = %q", got)
	}
	if now, _ := inoOf(t, p); now != ino {
		t.Error("the undo replaced the inode")
	}

	wput(t, p, "one\n")
	resp, err = s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("log"), Content: []byte("two\n"), Append: true, IfSha256: wsum([]byte("one\n"))})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("ONE"), 0)
	f.Close()
	_, err = s.Undo(ctx, &fsmcpv1.UndoRequest{Token: resp.GetUndo()})
	wantWriteCode(t, "Undo", err, fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED)
	if got := wcontent(t, p); got != "ONE\ntwo\n" {
		t.Errorf("after the refused undo, log = %q", got)
	}
}

// An append's undo token still works after a restart: the quarantine's
// index keeps the size to cut back to.
func TestAppendUndoAfterRestart(t *testing.T) {
	ctx := context.Background()
	s, root, qdir := newQuarantineService(t, 1<<20)
	p := filepath.Join(root, "log")
	wput(t, p, "one\n")
	resp, err := s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("log"), Content: []byte("two\n"), Append: true, IfSha256: wsum([]byte("one\n"))})
	if err != nil {
		t.Fatal(err)
	}
	again := quarantineServiceOver(t, root, qdir, 1<<20)
	undoOf(t, again, resp.GetUndo())
	if got := wcontent(t, p); got != "one\n" {
		t.Errorf("after the undo in the next run, log = %q", got)
	}
}

// Concurrent appends to several files each take a slot of their own and
// free it: all land whole, and the slots are reused, not multiplied.
func TestAppendConcurrentSlots(t *testing.T) {
	s, dir := newWriteService(t)
	const files, rounds = 4, 8
	for i := range files {
		wput(t, filepath.Join(dir, string(rune('a'+i))), "")
	}
	errs := make(chan error, files)
	for i := range files {
		go func() {
			name := string(rune('a' + i))
			sum := wsum(nil)
			for range rounds {
				var err error
				if sum, err = appendOnce(t, s, name, sum, []byte("line\n")); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range files {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range files {
		if got := wcontent(t, filepath.Join(dir, string(rune('a'+i)))); got != string(bytes.Repeat([]byte("line\n"), rounds)) {
			t.Errorf("%c = %q", 'a'+i, got)
		}
	}
	if n := len(s.appends.Free); n > files || n != s.appends.Made {
		t.Errorf("%d slots made, %d free, want at most %d, all free", s.appends.Made, n, files)
	}
}
