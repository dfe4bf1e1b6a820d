package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// atomicWriteRoot is the in-process baseline of an fs_write: hash the old
// file, write a temp file beside it, fsync, set the mode, rename it over
// the target and fsync the directory, all as direct calls on an os.Root.
func atomicWriteRoot(b *testing.B, r *os.Root, name string, content []byte) {
	old, err := r.ReadFile(name)
	if err != nil {
		b.Fatal(err)
	}
	sha256.Sum256(old)
	tmp := ".bench-tmp"
	f, err := r.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		b.Fatal(err)
	}
	if err := f.Chmod(0o644); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	if err := r.Rename(tmp, name); err != nil {
		b.Fatal(err)
	}
	d, err := r.Open(".")
	if err != nil {
		b.Fatal(err)
	}
	d.Sync()
	d.Close()
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// BenchmarkWrite4K compares a 4 KiB fs_write through the whole server (MCP
// client, front-end, gRPC, confined worker: precondition hash, temp file,
// metadata copy and check, fsync, exchange, directory fsync) with the same
// atomic write done by direct os.Root calls in this process.
func BenchmarkWrite4K(b *testing.B) {
	versions := [2][]byte{make([]byte, 4096), make([]byte, 4096)}
	rand.Read(versions[0])
	rand.Read(versions[1])
	for i := range versions {
		for j := range versions[i] {
			versions[i][j] = 'a' + versions[i][j]%26
		}
	}
	setup := func(b *testing.B) string {
		root := b.TempDir()
		if err := os.WriteFile(filepath.Join(root, "f.txt"), versions[0], 0o644); err != nil {
			b.Fatal(err)
		}
		return root
	}
	b.Run("inprocess", func(b *testing.B) {
		r, err := os.OpenRoot(setup(b))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			i++
			t0 := time.Now()
			atomicWriteRoot(b, r, "f.txt", versions[i%2])
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
	b.Run("server", func(b *testing.B) {
		s := benchServer(b, setup(b))
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			i++
			params := &mcp.CallToolParams{Name: "fs_write", Arguments: map[string]any{"path": "f.txt",
				"content": string(versions[i%2]), "if_sha256": hexSHA(versions[(i+1)%2])}}
			t0 := time.Now()
			res, err := s.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("fs_write: %v %v", err, res)
			}
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
}

// BenchmarkReplace1M compares a one-edit fs_replace on a 1 MiB file through
// the whole server with reading, editing and atomically rewriting it by
// direct os.Root calls in this process.
func BenchmarkReplace1M(b *testing.B) {
	markers := [2][]byte{[]byte("MARKER-AAAA"), []byte("MARKER-BBBB")}
	base := bytes.Repeat([]byte("0123456789abcdef ordinary line of text\n"), (1<<20)/39)
	base = append(base[:len(base)/2:len(base)/2], append(append([]byte{}, markers[0]...), base[len(base)/2:]...)...)
	// contents[i] holds markers[i].
	contents := [2][]byte{base, bytes.Replace(base, markers[0], markers[1], 1)}
	setup := func(b *testing.B) string {
		root := b.TempDir()
		if err := os.WriteFile(filepath.Join(root, "big.txt"), contents[0], 0o644); err != nil {
			b.Fatal(err)
		}
		return root
	}
	b.Run("inprocess", func(b *testing.B) {
		r, err := os.OpenRoot(setup(b))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			i++
			t0 := time.Now()
			data, err := r.ReadFile("big.txt")
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Count(data, markers[(i+1)%2]) != 1 {
				b.Fatal("the marker is not unique")
			}
			atomicWriteRoot(b, r, "big.txt", bytes.Replace(data, markers[(i+1)%2], markers[i%2], 1))
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
	b.Run("server", func(b *testing.B) {
		s := benchServer(b, setup(b))
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			i++
			params := &mcp.CallToolParams{Name: "fs_replace", Arguments: map[string]any{"path": "big.txt",
				"if_sha256": hexSHA(contents[(i+1)%2]),
				"edits":     []any{map[string]any{"old": string(markers[(i+1)%2]), "new": string(markers[i%2])}}}}
			t0 := time.Now()
			res, err := s.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("fs_replace: %v %v", err, res)
			}
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
}
