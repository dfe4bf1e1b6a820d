package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mediaFiles are real encodings of each kind fs_view shows, by the bytes
// a decoder (or the format's own header) defines.
func mediaFiles(t *testing.T) map[string][]byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var pngB, jpgB, gifB bytes.Buffer
	if err := png.Encode(&pngB, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpgB, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&gifB, img, nil); err != nil {
		t.Fatal(err)
	}
	riff := func(form string, body []byte) []byte {
		b := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(4+len(body)))...)
		return append(append(b, form...), body...)
	}
	webp := riff("WEBP", append([]byte("VP8L"), binary.LittleEndian.AppendUint32(nil, 5)...))
	webp = append(webp, 0x2f, 0, 0, 0, 0, 0)
	fmtChunk := append([]byte("fmt "), binary.LittleEndian.AppendUint32(nil, 16)...)
	fmtChunk = binary.LittleEndian.AppendUint16(fmtChunk, 1)     // PCM
	fmtChunk = binary.LittleEndian.AppendUint16(fmtChunk, 1)     // mono
	fmtChunk = binary.LittleEndian.AppendUint32(fmtChunk, 8000)  // rate
	fmtChunk = binary.LittleEndian.AppendUint32(fmtChunk, 16000) // bytes/s
	fmtChunk = binary.LittleEndian.AppendUint16(fmtChunk, 2)     // align
	fmtChunk = binary.LittleEndian.AppendUint16(fmtChunk, 16)    // bits
	data := append([]byte("data"), binary.LittleEndian.AppendUint32(nil, 4)...)
	wav := riff("WAVE", append(append(fmtChunk, data...), 0, 0, 1, 0))
	// Two MPEG-1 layer III frames, 128 kbit/s at 44.1 kHz: 417 bytes each.
	frame := make([]byte, 417)
	copy(frame, []byte{0xff, 0xfb, 0x90, 0x64})
	mp3 := append(bytes.Clone(frame), frame...)
	id3 := append([]byte("ID3\x03\x00\x00\x00\x00\x00\x00"), frame...)
	ogg := append([]byte("OggS\x00\x02"), make([]byte, 40)...)
	flac := append([]byte("fLaC\x00\x00\x00\x22"), make([]byte, 34)...)
	return map[string][]byte{
		"image/png": pngB.Bytes(), "image/jpeg": jpgB.Bytes(), "image/gif": gifB.Bytes(), "image/webp": webp,
		"audio/wav": wav, "audio/mpeg": mp3, "audio/mpeg+id3": id3, "audio/ogg": ogg, "audio/flac": flac,
	}
}

// view calls fs_view and returns its document and its media block.
func (s *server) view(args map[string]any) (map[string]any, mcp.Content, bool) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "fs_view", Arguments: args})
	if err != nil {
		s.t.Fatalf("fs_view(%v): %v", args, err)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		s.t.Fatalf("fs_view(%v): first block is %T, want the document", args, res.Content[0])
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(tc.Text), &doc); err != nil {
		s.t.Fatal(err)
	}
	switch {
	case res.IsError && len(res.Content) != 1, !res.IsError && len(res.Content) != 2:
		s.t.Fatalf("fs_view(%v): %d blocks, isError %v", args, len(res.Content), res.IsError)
	}
	if res.IsError {
		return doc, nil, false
	}
	return doc, res.Content[1], true
}

func TestViewSniffsBytes(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(base, "outside.png"), mediaFiles(t)["image/png"], 0o644)
	// Every file is named as something it is not.
	names := map[string]string{}
	for kind, data := range mediaFiles(t) {
		name := "mislabelled-" + filepath.Base(kind) + ".txt"
		writeFile(t, filepath.Join(root, name), data, 0o644)
		names[name] = kind
	}
	writeFile(t, filepath.Join(root, "text.png"), []byte("just some text, named as a picture\n"), 0o644)
	writeFile(t, filepath.Join(root, "drawing.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), 0o644)
	writeFile(t, filepath.Join(root, "drawing.png"), []byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>`), 0o644)
	writeFile(t, filepath.Join(root, "empty.gif"), nil, 0o644)
	big := append(bytes.Clone(mediaFiles(t)["image/png"]), make([]byte, 3000)...)
	writeFile(t, filepath.Join(root, "big.png"), big, 0o644)
	if err := os.Symlink("../outside.png", filepath.Join(root, "out.png")); err != nil {
		t.Fatal(err)
	}
	// A sparse terabyte: read, it would exhaust the worker.
	writeFile(t, filepath.Join(root, "huge.png"), mediaFiles(t)["image/png"], 0o644)
	if err := os.Truncate(filepath.Join(root, "huge.png"), 1<<40); err != nil {
		t.Fatal(err)
	}
	s := start(t, root, "--max-media-bytes", "2000")
	for name, kind := range names {
		doc, media, ok := s.view(map[string]any{"path": name})
		want := mediaFiles(t)[kind]
		mime := kind
		if kind == "audio/mpeg+id3" {
			mime = "audio/mpeg"
		}
		if !ok || doc["mime_type"] != mime || int(doc["size"].(float64)) != len(want) || doc["sha256"] != sha(want) || doc["path"] != name {
			t.Errorf("fs_view(%s) = %v, want %s", name, doc, mime)
			continue
		}
		switch m := media.(type) {
		case *mcp.ImageContent:
			if mime[:5] != "image" || m.MIMEType != mime || !bytes.Equal(m.Data, want) || doc["content"] != "image" {
				t.Errorf("fs_view(%s): image block %s of %d bytes", name, m.MIMEType, len(m.Data))
			}
		case *mcp.AudioContent:
			if mime[:5] != "audio" || m.MIMEType != mime || !bytes.Equal(m.Data, want) || doc["content"] != "audio" {
				t.Errorf("fs_view(%s): audio block %s of %d bytes", name, m.MIMEType, len(m.Data))
			}
		default:
			t.Errorf("fs_view(%s): second block is %T", name, media)
		}
	}
	for path, code := range map[string]string{
		"text.png": "unsupported", "drawing.svg": "unsupported", "drawing.png": "unsupported", "empty.gif": "unsupported",
		"big.png": "too_large", "huge.png": "too_large", "out.png": "outside_root", "../outside.png": "outside_root", "sub": "is_a_directory",
		"missing.png": "not_found",
	} {
		s.wantErr("fs_view", map[string]any{"path": path}, code)
	}
}
