package frontend

import (
	"bytes"
	"context"
	"net/http"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fs_view: a picture or a sound for a multimodal model. The reply is the
// JSON document first, then one MCP image or audio block. What the file
// is comes from its bytes, never its name: a PNG named .txt is shown, a
// text file named .png is unsupported, and SVG (text that a renderer
// would execute) is never an image here.

type viewIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file; required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
}

var viewTool = toolDecl[viewIn]{
	name:  "fs_view",
	title: "View media",
	description: "Look at a picture or listen to a sound: PNG, JPEG, GIF, WebP, WAV, MP3, OGG or FLAC, " +
		"judged by its bytes. The reply is a document (mime_type, size, sha256), then the image or audio itself. " +
		"Other files are unsupported: read them with fs_read.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).view,
}

// mediaTypes are what fs_view shows. http.DetectContentType (the WHATWG
// MIME sniffing algorithm) recognises most by their signatures; FLAC and
// MP3 without an ID3 tag it does not, so they are sniffed here.
var mediaTypes = map[string]string{
	"image/png": "image/png", "image/jpeg": "image/jpeg", "image/gif": "image/gif", "image/webp": "image/webp",
	"audio/wave": "audio/wav", "audio/mpeg": "audio/mpeg", "application/ogg": "audio/ogg",
}

// sniffMedia returns the MIME type of data, or "" when fs_view does not
// show it.
func sniffMedia(data []byte) string {
	if t, ok := mediaTypes[http.DetectContentType(data)]; ok {
		return t
	}
	switch {
	case bytes.HasPrefix(data, []byte("fLaC")):
		return "audio/flac"
	case isMP3Frame(data):
		return "audio/mpeg"
	}
	return ""
}

// isMP3Frame reports whether data starts with an MPEG audio layer III
// frame header (no ID3 tag): 11 sync bits, a version and layer III, a
// bitrate and sample rate that are not reserved, and a second frame
// header where the first frame's length says it begins.
func isMP3Frame(data []byte) bool {
	frame := func(h []byte) (int, bool) {
		if len(h) < 4 || h[0] != 0xff || h[1]&0xe0 != 0xe0 {
			return 0, false
		}
		version, layer := (h[1]>>3)&3, (h[1]>>1)&3
		bitrate, rate, pad := h[2]>>4, (h[2]>>2)&3, int(h[2]>>1)&1
		if version == 1 || layer != 1 || bitrate == 0 || bitrate == 15 || rate == 3 {
			return 0, false
		}
		// MPEG-1 layer III rates; MPEG-2 and 2.5 use the second row.
		kbps := [2][15]int{{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}}
		hz := [4][3]int{{11025, 12000, 8000}, {}, {22050, 24000, 16000}, {44100, 48000, 32000}}
		row, coef := 0, 144
		if version != 3 {
			row, coef = 1, 72
		}
		return coef*kbps[row][bitrate]*1000/hz[version][rate] + pad, true
	}
	n, ok := frame(data)
	if !ok || n < 4 {
		return false
	}
	_, ok = frame(data[min(n, len(data)):])
	return ok
}

func (s *server) view(ctx context.Context, in *viewIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.View(ctx, &fsmcpv1.ViewRequest{Path: p})
	if err != nil {
		return nil, err
	}
	data := resp.GetData()
	mime := sniffMedia(data)
	if mime == "" {
		return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED,
			"not a picture or sound fs_view shows (PNG, JPEG, GIF, WebP, WAV, MP3, OGG, FLAC, judged by its bytes); read it with fs_read")
	}
	doc := newObj().bool("ok", true).name("path", displayPath(p)).str("mime_type", mime).
		int("size", int64(len(data))).str("sha256", resp.GetSha256())
	if mime[:5] == "image" {
		doc.str("content", "image")
		doc.media = &mcp.ImageContent{Data: data, MIMEType: mime}
	} else {
		doc.str("content", "audio")
		doc.media = &mcp.AudioContent{Data: data, MIMEType: mime}
	}
	return doc, nil
}
