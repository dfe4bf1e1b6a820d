package frontend

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// globOddNames are what the trees of TestGlobReplyBytes are made of:
// every byte a JSON string escapes, bytes that are not UTF-8, runes that
// are left as they are, HTML's specials, and names of the longest length.
var globOddNames = []string{
	"plain.go", `quo"te`, `back\slash`, "tab\there", "new\nline", "cr\rret", "bell\x07",
	"\x01\x1f\x7f", "bad\xffutf8", "half\xc3", "\xc3\xa9t\xc3\xa9", "sep\u2028par\u2029",
	"<a>&amp;", "sp ace", "-dash", "x", strings.Repeat("L", 255), strings.Repeat("é", 127),
	`\u0041`, `\"`, "ends\\",
}

// refJSONString is a JSON string as the replies write one, written byte
// by byte: ", \, \n, \r, \t with a backslash, other bytes below 0x20 as
// \u00xx in lowercase hex, every other byte as it is.
func refJSONString(s []byte) []byte {
	out := []byte{'"'}
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c == '\n':
			out = append(out, `\n`...)
		case c == '\r':
			out = append(out, `\r`...)
		case c == '\t':
			out = append(out, `\t`...)
		case c < 0x20:
			out = append(out, `\u00`...)
			out = append(out, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}

// refGlobEntry is the reply's object for the path p: {"path":…}, or
// {"path_base64":…} for a path that is not UTF-8.
func refGlobEntry(p []byte) []byte {
	if !utf8.Valid(p) {
		return []byte(`{"path_base64":"` + base64.StdEncoding.EncodeToString(p) + `"}`)
	}
	return append(append([]byte(`{"path":`), refJSONString(p)...), '}')
}

// refGlobPage is the whole reply listing paths, of a listing of total,
// ending with cursor when not "".
func refGlobPage(paths [][]byte, total int, cursor string) string {
	b := []byte(`{"ok":true,"path":"","files":[`)
	for i, p := range paths {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, refGlobEntry(p)...)
	}
	b = append(b, `],"total":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if cursor != "" {
		b = append(b, `,"truncated":true,"cursor":"`...)
		b = append(b, cursor...)
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

// genGlobTree writes a tree of odd names below root and returns its files'
// paths, sorted by bytes.
func genGlobTree(t *testing.T, rng *rand.Rand, root string) [][]byte {
	t.Helper()
	var files [][]byte
	var fill func(dir string, rel []byte, depth int)
	fill = func(dir string, rel []byte, depth int) {
		for _, i := range rng.Perm(len(globOddNames))[:6+rng.Intn(10)] {
			name := globOddNames[i]
			r := append(slices.Clip(rel), name...)
			// rg's glob * does not match a path whose directory holds a
			// newline: such a name is only a file's.
			if depth < 3 && rng.Intn(3) == 0 && !strings.Contains(name, "\n") {
				if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
					t.Fatal(err)
				}
				fill(filepath.Join(dir, name), append(r, '/'), depth+1)
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, r)
		}
	}
	fill(root, nil, 0)
	slices.SortFunc(files, bytes.Compare)
	return files
}

// fs_glob's reply is, byte for byte, the reference rendering of the sorted
// listing, over generated trees of odd names: whole (the stdio and HTTP
// encoding, and go-sdk's with --structured-content), and page by page at
// a small --max-response-bytes, where each page holds the next paths, is
// within the bound, and its cursor is the last path's.
func TestGlobReplyBytes(t *testing.T) {
	const pageBytes = 4096
	for seed := range int64(4) {
		rng := rand.New(rand.NewSource(seed))
		root := filepath.Join(t.TempDir(), "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		files := genGlobTree(t, rng, root)
		args := map[string]any{"path": "", "pattern": "*", "hidden": true, "no_ignore": true}

		want := refGlobPage(files, len(files), "")
		whole := start(t, root, "--max-response-bytes", "1048576").wantOK("fs_glob", args)
		if whole.Text != want {
			t.Fatalf("seed %d: fs_glob %s", seed, textDiff(whole.Text, want))
		}
		// With structuredContent the result is encoded by go-sdk.
		whole = start(t, root, "--max-response-bytes", "2097152", "--structured-content").wantOK("fs_glob", args)
		if whole.Text != want {
			t.Fatalf("seed %d: fs_glob with --structured-content %s", seed, textDiff(whole.Text, want))
		}

		h := start(t, root, "--max-response-bytes", strconv.Itoa(pageBytes))
		var walked [][]byte
		pages := 0
		for ; ; pages++ {
			if pages > len(files) {
				t.Fatalf("seed %d: no progress after %d pages", seed, pages)
			}
			r := h.wantOK("fs_glob", args)
			if len(r.Text) > pageBytes {
				t.Fatalf("seed %d: a page of %d bytes over %d", seed, len(r.Text), pageBytes)
			}
			n := len(r.Doc["files"].([]any))
			page := files[len(walked):min(len(walked)+n, len(files))]
			cursor := ""
			if r.Doc["truncated"] == true {
				cursor = base64.RawURLEncoding.EncodeToString(page[len(page)-1])
			}
			if want := refGlobPage(page, len(files), cursor); r.Text != want {
				t.Fatalf("seed %d, page %d: fs_glob %s", seed, pages, textDiff(r.Text, want))
			}
			walked = append(walked, page...)
			if cursor == "" {
				break
			}
			args["cursor"] = cursor
		}
		if len(walked) != len(files) {
			t.Fatalf("seed %d: the pages walked %d paths of %d", seed, len(walked), len(files))
		}
		if pages < 2 {
			t.Fatalf("seed %d: %d paths fit in %d pages: the tree tests no paging", seed, len(files), pages+1)
		}
	}
}

// textDiff says where got first differs from want.
func textDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-80, 0)
	return fmt.Sprintf("differs at byte %d of %d (want %d):\n got …%q…\nwant …%q…",
		i, len(got), len(want), got[from:min(i+80, len(got))], want[from:min(i+80, len(want))])
}
