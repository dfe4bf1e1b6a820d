package worker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// treeHashes records every name under dir with its type and content.
func treeHashes(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out = append(out, "error "+p)
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+" "+wsum(b))
		}
		return nil
	})
	return fmt.Sprint(out)
}

// refill is fillTree for the swapping goroutine, which races deletes and
// so ignores errors.
func refill(dir string) {
	for _, f := range []string{"f.txt", "x", "sub/g.txt", "sub/deeper/h.txt", "sub/deeper/deepest/i"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("inside "+f+"\n"), 0o644)
	}
}

func fillTree(t *testing.T, dir, label string) {
	t.Helper()
	for _, f := range []string{"f.txt", "x", "sub/g.txt", "sub/deeper/h.txt", "sub/deeper/deepest/i"} {
		wput(t, filepath.Join(dir, f), label+" "+f+"\n")
	}
}

// The worker's own code, without Landlock behind it, never follows a
// symlink swapped in for a directory while Delete (recursive), Move, Write,
// Replace and Mkdir run concurrently on paths through it: the outside tree
// is unchanged.
func TestMutationsRaceSymlinkSwapWithoutLandlock(t *testing.T) {
	s, dir := newWriteService(t)
	outside := filepath.Join(filepath.Dir(dir), "outside")
	fillTree(t, outside, "outside")
	fillTree(t, filepath.Join(outside, "canary"), "outside")
	before := treeHashes(t, outside)
	d, real := filepath.Join(dir, "d"), filepath.Join(dir, "d.real")
	fillTree(t, d, "inside")

	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if os.Rename(d, real) == nil {
				target := "../outside"
				if i%2 == 1 {
					target = outside
				}
				os.Symlink(target, d)
				swaps.Add(1)
				time.Sleep(time.Duration(i%4) * 20 * time.Microsecond)
				os.Remove(d)
				if os.Rename(real, d) != nil {
					os.RemoveAll(real) // something new took the name meanwhile
				}
			}
			sub, subReal := filepath.Join(d, "sub"), filepath.Join(d, "sub.real")
			if os.Rename(sub, subReal) == nil {
				os.Symlink("../../outside/canary/sub", sub)
				swaps.Add(1)
				time.Sleep(time.Duration(i%3) * 20 * time.Microsecond)
				os.Remove(sub)
				if os.Rename(subReal, sub) != nil {
					os.RemoveAll(subReal)
				}
			}
			if _, err := os.Lstat(filepath.Join(d, "sub")); os.IsNotExist(err) {
				refill(d)
			}
		}
	}()
	ctx := context.Background()
	var calls, internal atomic.Int64
	deadline := time.Now().Add(5 * time.Second)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i++ {
				var err error
				switch i % 9 {
				case 0:
					_, err = s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("d"), Recursive: true})
				case 1:
					_, err = s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("d/sub"), Recursive: true})
				case 2:
					_, err = s.Delete(ctx, &fsmcpv1.DeleteRequest{Path: []byte("d/sub/deeper/h.txt")})
				case 3:
					_, err = s.Move(ctx, &fsmcpv1.MoveRequest{From: []byte("d/sub/g.txt"), To: []byte("stolen")})
				case 4:
					_, err = s.Move(ctx, &fsmcpv1.MoveRequest{From: []byte("stolen"), To: []byte("d/sub/back")})
				case 5:
					_, err = s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("d/x"), Content: []byte("overwritten"),
						IfSha256: wsum([]byte("outside x\n"))})
				case 6:
					_, err = s.Write(ctx, &fsmcpv1.WriteRequest{Path: []byte("d/sub/new"), Content: []byte("created"), MustNotExist: true})
				case 7:
					_, err = s.Replace(ctx, &fsmcpv1.ReplaceRequest{Path: []byte("d/sub/g.txt"), IfSha256: wsum([]byte("outside sub/g.txt\n")),
						Edits: []*fsmcpv1.Edit{{Old: []byte("outside"), New: []byte("REPLACED")}}})
				case 8:
					_, err = s.Mkdir(ctx, &fsmcpv1.MkdirRequest{Path: []byte("d/sub/made/here")})
				}
				calls.Add(1)
				if e, ok := err.(*Error); ok && e.Code == fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL {
					internal.Add(1)
					t.Errorf("call %d: %v", i, err)
				}
			}
		}()
	}
	time.Sleep(time.Until(deadline))
	close(stop)
	wg.Wait()
	if got := treeHashes(t, outside); got != before {
		t.Fatalf("the outside tree changed:\nbefore %s\nafter  %s", before, got)
	}
	t.Logf("%d calls during %d swaps", calls.Load(), swaps.Load())
	if swaps.Load() < 100 || calls.Load() < 100 {
		t.Errorf("only %d swaps and %d calls: the race was not exercised", swaps.Load(), calls.Load())
	}
}

// A recursive delete removes symlinks in the tree as names and leaves
// their targets alone, outside and inside the root.
func TestDeleteRecursiveKeepsLinkTargets(t *testing.T) {
	s, dir := newWriteService(t)
	outside := filepath.Join(filepath.Dir(dir), "outside")
	fillTree(t, outside, "outside")
	fillTree(t, filepath.Join(dir, "keep"), "inside")
	before, beforeKeep := treeHashes(t, outside), treeHashes(t, filepath.Join(dir, "keep"))
	fillTree(t, filepath.Join(dir, "d"), "inside")
	os.Symlink(outside, filepath.Join(dir, "d", "abs"))
	os.Symlink("../../outside", filepath.Join(dir, "d", "sub", "rel"))
	os.Symlink("../keep", filepath.Join(dir, "d", "keep"))
	resp, err := s.Delete(context.Background(), &fsmcpv1.DeleteRequest{Path: []byte("d"), Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	// d, 5 files, sub, deeper, deepest, 3 links
	if resp.GetRemoved() != 12 {
		t.Errorf("removed %d, want 12", resp.GetRemoved())
	}
	if _, err := os.Lstat(filepath.Join(dir, "d")); !os.IsNotExist(err) {
		t.Errorf("d still exists: %v", err)
	}
	if treeHashes(t, outside) != before || treeHashes(t, filepath.Join(dir, "keep")) != beforeKeep {
		t.Fatal("a link target changed")
	}
}

// A directory swapped for a symlink to outside at the last moment before a
// recursive delete opens it is removed as a name; nothing behind the link
// is touched. The swap happens at every directory of the walk.
func TestDeleteRecursiveSwapBeforeOpen(t *testing.T) {
	for _, target := range []string{"abs", "../../outside", "../../../outside"} {
		t.Run(target, func(t *testing.T) {
			s, dir := newWriteService(t)
			outside := filepath.Join(filepath.Dir(dir), "outside")
			fillTree(t, outside, "outside")
			before := treeHashes(t, outside)
			fillTree(t, filepath.Join(dir, "d"), "inside")
			swapped := 0
			s.beforeDescend = func(name string) {
				// The walker is about to open name in some directory of
				// d: replace every directory by that name with a link.
				filepath.WalkDir(filepath.Join(dir, "d"), func(p string, de fs.DirEntry, err error) error {
					if err == nil && de.IsDir() && de.Name() == name && p != filepath.Join(dir, "d") {
						hidden := filepath.Join(filepath.Dir(dir), fmt.Sprintf("hidden%d", swapped))
						os.Rename(p, hidden)
						link := target
						if target == "abs" {
							link = outside
						}
						os.Symlink(link, p)
						swapped++
						return fs.SkipDir
					}
					return nil
				})
			}
			if _, err := s.Delete(context.Background(), &fsmcpv1.DeleteRequest{Path: []byte("d"), Recursive: true}); err != nil {
				t.Fatal(err)
			}
			if swapped == 0 {
				t.Fatal("no directory was swapped")
			}
			if got := treeHashes(t, outside); got != before {
				t.Fatalf("the outside tree changed:\nbefore %s\nafter  %s", before, got)
			}
			if _, err := os.Lstat(filepath.Join(dir, "d")); !os.IsNotExist(err) {
				t.Errorf("d still exists: %v", err)
			}
		})
	}
}
