package main

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// swapper plays an outside process that keeps replacing a directory of the
// root with a symlink to outside, and back, while the server works on it.
type swapper struct {
	root, outside string
	stop          chan struct{}
	wg            sync.WaitGroup
	swaps         atomic.Int64
}

// populate (re)creates root/d with files and a subdirectory.
func populate(root string) {
	d := filepath.Join(root, "d")
	os.MkdirAll(filepath.Join(d, "sub", "deeper"), 0o755)
	for _, f := range []string{"f.txt", "x", "sub/g.txt", "sub/deeper/h.txt"} {
		os.WriteFile(filepath.Join(d, f), []byte("inside "+f+"\n"), 0o644)
	}
}

func startSwapper(root, outside string) *swapper {
	sw := &swapper{root: root, outside: outside, stop: make(chan struct{})}
	populate(root)
	sw.wg.Add(1)
	go func() {
		defer sw.wg.Done()
		d, real := filepath.Join(root, "d"), filepath.Join(root, "d.real")
		for i := 0; ; i++ {
			select {
			case <-sw.stop:
				return
			default:
			}
			// d becomes a symlink to outside (relative or absolute)...
			if os.Rename(d, real) == nil {
				target := "../outside"
				if i%2 == 1 {
					target = outside
				}
				os.Symlink(target, d)
				sw.swaps.Add(1)
				time.Sleep(time.Duration(i%5) * 50 * time.Microsecond)
				os.Remove(d) // the symlink, if the server left it
				if os.Rename(real, d) != nil {
					os.RemoveAll(real) // something new took the name meanwhile
				}
			}
			// ...and so does d/sub, one level down.
			sub, subReal := filepath.Join(d, "sub"), filepath.Join(d, "sub.real")
			if os.Rename(sub, subReal) == nil {
				os.Symlink("../../outside/canary", sub)
				sw.swaps.Add(1)
				time.Sleep(time.Duration(i%3) * 50 * time.Microsecond)
				os.Remove(sub)
				if os.Rename(subReal, sub) != nil {
					os.RemoveAll(subReal)
				}
			}
			if _, err := os.Lstat(d); os.IsNotExist(err) {
				populate(root)
			}
		}
	}()
	return sw
}

func (sw *swapper) halt() {
	close(sw.stop)
	sw.wg.Wait()
}

// canary builds a tree outside the root that no tool may touch.
func canary(t *testing.T, outside string) {
	t.Helper()
	for _, f := range []string{"canary/f.txt", "canary/x", "canary/sub/g.txt", "canary/deeper/h.txt", "f.txt", "x"} {
		p := filepath.Join(outside, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, []byte("outside "+f+"\n"), 0o644)
	}
}

// While a directory is swapped for a symlink to outside, over and over,
// fs_delete recursive, fs_move, fs_write, fs_replace and fs_mkdir run in a
// loop on paths through it. Nothing outside the root changes, and nothing
// answers internal.
func TestWriteToolsRaceSymlinkSwap(t *testing.T) {
	root, outside := tree(t)
	canary(t, outside)
	before := snapshot(t, outside)
	s := start(t, root)
	sw := startSwapper(root, outside)
	codes := map[string]int{}
	deadline := time.Now().Add(8 * time.Second)
	iterations := 0
	for ; time.Now().Before(deadline); iterations++ {
		calls := []struct {
			name string
			args map[string]any
		}{
			{"fs_write", map[string]any{"path": "d/f.txt", "content": "overwritten", "if_sha256": sha([]byte("inside f.txt\n"))}},
			{"fs_write", map[string]any{"path": "d/x", "content": "overwritten", "if_sha256": sha([]byte("outside x\n"))}},
			{"fs_write", map[string]any{"path": "d/new.txt", "content": "created", "if_sha256": nil}},
			{"fs_write", map[string]any{"path": "d/sub/g.txt", "content": "overwritten", "if_sha256": sha([]byte("inside sub/g.txt\n"))}},
			{"fs_replace", map[string]any{"path": "d/sub/g.txt", "if_sha256": sha([]byte("outside canary/sub/g.txt\n")),
				"edits": []any{map[string]any{"old": "outside", "new": "REPLACED"}}}},
			{"fs_move", map[string]any{"from": "d/x", "to": "d/moved"}},
			{"fs_move", map[string]any{"from": "d/sub/g.txt", "to": "stolen.txt"}},
			{"fs_move", map[string]any{"from": "stolen.txt", "to": "d/sub/returned.txt"}},
			{"fs_mkdir", map[string]any{"path": "d/sub/made/here"}},
			{"fs_delete", map[string]any{"path": "d/sub", "recursive": true}},
			{"fs_delete", map[string]any{"path": "d/f.txt"}},
			{"fs_delete", map[string]any{"path": "d", "recursive": true}},
		}
		c := calls[iterations%len(calls)]
		r := s.call(c.name, c.args)
		code := "ok"
		if r.isError {
			code = r.code()
		}
		codes[c.name+":"+code]++
		if code == "internal" {
			t.Errorf("%s(%v) = %s", c.name, c.args, r.text)
		}
		noHostPath(t, r.text, outside)
	}
	sw.halt()
	sameSnapshot(t, "the outside canary tree", before, snapshot(t, outside))
	t.Logf("%d calls during %d swaps: %v", iterations, sw.swaps.Load(), codes)
	if sw.swaps.Load() < 100 || iterations < 100 {
		t.Errorf("only %d swaps and %d calls: the race was not exercised", sw.swaps.Load(), iterations)
	}
}
