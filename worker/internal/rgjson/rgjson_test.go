package rgjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// The caps the worker's grep passes.
const (
	maxLineText   = 64 << 10
	maxSubmatches = 256
)

// parseAll decodes every event of data with the given caps.
func parseAll(r io.Reader, maxText, maxSub int) ([]Event, error) {
	return parseSkipping(r, maxText, maxSub, nil)
}

// skipMatches passes over match messages.
func skipMatches(t Type) bool { return t == Match }

func parseSkipping(r io.Reader, maxText, maxSub int, skip func(Type) bool) ([]Event, error) {
	p := NewReader(r, maxText, maxSub)
	var out []Event
	for {
		var ev Event
		err := p.Next(&ev, skip)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// refEvent decodes one message with encoding/json, the reference the
// streaming parser must agree with, and applies the same caps. ok is false
// when the message is not one the comparison can judge.
func refEvent(line []byte, maxText, maxSub int) (ev Event, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || dec.More() {
		return ev, false
	}
	if typ, isStr := m["type"].(string); isStr {
		ev.Type = eventTypes[typ]
	}
	data, isObj := m["data"].(map[string]any)
	if !isObj {
		return ev, m["data"] == nil
	}
	num := func(v any, dst *int64) bool {
		if v == nil {
			return true
		}
		n, isNum := v.(json.Number)
		if !isNum {
			return false
		}
		i, err := n.Int64()
		if err != nil || i < 0 || strings.ContainsAny(string(n), ".eE-") {
			return false
		}
		*dst = i
		return true
	}
	// textOrBytes: ok, value, full length, isBytes, present.
	tb := func(v any, max int) (bool, []byte, int64, bool, bool) {
		if v == nil {
			return true, nil, 0, false, false
		}
		o, isObj := v.(map[string]any)
		if !isObj {
			return false, nil, 0, false, false
		}
		t, hasT := o["text"]
		b, hasB := o["bytes"]
		switch {
		case hasT && hasB:
			return false, nil, 0, false, false
		case hasT:
			s, isStr := t.(string)
			if !isStr {
				return false, nil, 0, false, false
			}
			out := []byte(s)
			if len(out) > max {
				out = trimPartialRune(out[:max])
			}
			return true, out, int64(len(s)), false, true
		case hasB:
			s, isStr := b.(string)
			if !isStr || strings.ContainsAny(s, "\r\n") {
				return false, nil, 0, false, false
			}
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return false, nil, 0, false, false
			}
			full := int64(len(raw))
			if len(raw) > max {
				raw = raw[:max]
			}
			return true, raw, full, true, true
		}
		return true, nil, 0, false, false
	}
	var okP, okL bool
	okP, ev.Path, _, _, ev.HasPath = tb(data["path"], MaxPathBytes)
	okL, ev.Text, ev.TextLen, ev.TextIsBytes, _ = tb(data["lines"], maxText)
	if !okP || !okL || !num(data["line_number"], &ev.LineNumber) || !num(data["absolute_offset"], &ev.Offset) {
		return ev, false
	}
	if v, has := data["submatches"]; has && v != nil {
		arr, isArr := v.([]any)
		if !isArr {
			return ev, false
		}
		for _, e := range arr {
			o, isObj := e.(map[string]any)
			if !isObj {
				return ev, false
			}
			var sm Submatch
			if !num(o["start"], &sm.Start) || !num(o["end"], &sm.End) {
				return ev, false
			}
			if len(ev.Submatches) < maxSub {
				ev.Submatches = append(ev.Submatches, sm)
			} else {
				ev.MoreSubmatches = true
			}
		}
	}
	if v, has := data["stats"]; has && v != nil {
		o, isObj := v.(map[string]any)
		if !isObj || !num(o["searches"], &ev.Searches) || !num(o["matched_lines"], &ev.MatchedLines) || !num(o["matches"], &ev.Matches) {
			return ev, false
		}
	}
	return ev, true
}

// normal makes empty and nil slices compare equal.
func normal(ev Event) Event {
	if len(ev.Path) == 0 {
		ev.Path = nil
	}
	if len(ev.Text) == 0 {
		ev.Text = nil
	}
	if len(ev.Submatches) == 0 {
		ev.Submatches = nil
	}
	return ev
}

// checkParse holds the parser's properties on any input: it never panics,
// keeps its caps, reads the same events however the input is split, and
// agrees with encoding/json on a well-formed single message.
func checkParse(t *testing.T, data []byte) {
	const maxText, maxSub = 48, 3
	evs, err := parseAll(bytes.NewReader(data), maxText, maxSub)
	evs1, err1 := parseAll(iotest.OneByteReader(bytes.NewReader(data)), maxText, maxSub)
	if (err == nil) != (err1 == nil) || !reflect.DeepEqual(evs, evs1) {
		t.Fatalf("whole reads: %d events, %v; byte reads: %d events, %v", len(evs), err, len(evs1), err1)
	}
	for _, ev := range evs {
		if len(ev.Text) > maxText || len(ev.Submatches) > maxSub {
			t.Fatalf("caps exceeded: %d text bytes, %d submatches", len(ev.Text), len(ev.Submatches))
		}
		if int64(len(ev.Text)) > ev.TextLen {
			t.Fatalf("text of %d bytes but line length %d", len(ev.Text), ev.TextLen)
		}
		if !ev.TextIsBytes && !utf8.Valid(ev.Text) && utf8.Valid(data) {
			t.Fatalf("cut text is not valid UTF-8: %q", ev.Text)
		}
	}
	// Passing over a message yields its type and nothing else. (rg writes
	// one message a line, which is what passing over relies on.)
	if err == nil && len(evs) == 1 && !bytes.Contains(bytes.TrimRight(data, "\n"), []byte("\n")) {
		skipped, serr := parseSkipping(iotest.HalfReader(bytes.NewReader(data)), maxText, maxSub, skipMatches)
		if serr != nil || len(skipped) != len(evs) {
			t.Fatalf("passing over matches: %d events, %v; want %d", len(skipped), serr, len(evs))
		}
		for i, ev := range skipped {
			want := evs[i]
			if ev.Type == Match && want.Type == Match {
				want = Event{Type: Match, PassedOver: true}
			}
			if !reflect.DeepEqual(normal(ev), normal(want)) {
				t.Fatalf("passing over matches: event %d = %+v, want %+v", i, ev, want)
			}
		}
	}
	if err != nil || len(evs) != 1 || !utf8.Valid(data) {
		return
	}
	want, ok := refEvent(data, maxText, maxSub)
	if !ok {
		return
	}
	if got := normal(evs[0]); !reflect.DeepEqual(got, normal(want)) {
		t.Fatalf("parse(%q)\n got %+v\nwant %+v", data, got, normal(want))
	}
}

// rgOutput runs the real rg --json over a small tree with the kinds of
// line that need care: invalid UTF-8, CRLF, escapes, a long line, a
// non-UTF-8 file name, context lines.
func rgOutput(t testing.TB) []byte {
	t.Helper()
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("rg is not installed")
	}
	dir := t.TempDir()
	files := map[string]string{
		"plain.txt":       "one hit\nmiss\nhit \"quoted\" \\ tab\there\n",
		"crlf.txt":        "hit crlf\r\nmiss\r\nhit again\r\n",
		"bad\xffname.txt": "hit in a file with a bad name\n",
		"latin1.txt":      "caf\xe9 hit\n",
		"ctl.txt":         "hit\x01\x02\x1f ctl\n",
		"long.txt":        strings.Repeat("ab", 300) + " hit " + strings.Repeat("é", 200) + "\n",
		"many.txt":        "hit hit hit hit hit hit\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(rg, "--no-config", "--json", "--context=1", "--regexp=hit", "--", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rg: %v", err)
	}
	return out
}

// Every message of real rg output decodes exactly as encoding/json reads
// it, line by line, with and without caps.
func TestRGJSONMatchesEncodingJSON(t *testing.T) {
	out := rgOutput(t)
	evs, err := parseAll(bytes.NewReader(out), maxLineText, maxSubmatches)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(evs) != len(lines) {
		t.Fatalf("parsed %d events from %d lines", len(evs), len(lines))
	}
	kinds := map[Type]int{}
	sawBytes := false
	for i, line := range lines {
		want, ok := refEvent(line, maxLineText, maxSubmatches)
		if !ok {
			t.Fatalf("reference cannot read rg's line %q", line)
		}
		if got := normal(evs[i]); !reflect.DeepEqual(got, normal(want)) {
			t.Fatalf("line %d: %s\n got %+v\nwant %+v", i, line, got, normal(want))
		}
		kinds[evs[i].Type]++
		sawBytes = sawBytes || evs[i].TextIsBytes
		checkParse(t, line)
	}
	if kinds[Begin] != 7 || kinds[End] != 7 || kinds[Summary] != 1 || kinds[Context] == 0 || kinds[Match] < 9 || !sawBytes {
		t.Fatalf("event kinds %v, bytes %v: the tree did not exercise every kind", kinds, sawBytes)
	}
	// Passing over matches keeps every other message whole.
	skipped, err := parseSkipping(bytes.NewReader(out), maxLineText, maxSubmatches, skipMatches)
	if err != nil || len(skipped) != len(evs) {
		t.Fatalf("passing over matches: %d events, %v; want %d", len(skipped), err, len(evs))
	}
	for i, ev := range skipped {
		if evs[i].Type == Match {
			if !ev.PassedOver || ev.Type != Match || ev.HasPath {
				t.Errorf("event %d: passed-over match decoded as %+v", i, ev)
			}
		} else if !reflect.DeepEqual(normal(ev), normal(evs[i])) {
			t.Errorf("event %d: %+v, want %+v", i, ev, evs[i])
		}
	}
	// With small caps, a long line keeps its first bytes and full length.
	small, err := parseAll(bytes.NewReader(out), 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, ev := range small {
		if ev.TextLen > 16 {
			cut = true
			if len(ev.Text) > 16 || len(ev.Text) < 16-utf8.UTFMax {
				t.Errorf("cut line kept %d bytes", len(ev.Text))
			}
		}
		if len(ev.Submatches) > 2 {
			t.Errorf("kept %d submatches, cap 2", len(ev.Submatches))
		}
	}
	if !cut {
		t.Error("no line was cut")
	}
}

func TestRGJSONRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		`{"type":"match","data":{"lines":{"text":"x`,
		`{"type":"match","data":{"line_number":1.5}}`,
		`{"type":"match","data":{"line_number":-1}}`,
		`{"type":"match","data":{"line_number":99999999999999999999}}`,
		`{"type":"match","data":{"lines":{"bytes":"abc"}}}`,
		`{"type":"match","data":{"lines":{"text":"a` + "\x01" + `"}}}`,
		`{"type":"match","data":{"path":{"text":"` + strings.Repeat("p", MaxPathBytes+1) + `"}}}`,
		`{"type":"begin"` + strings.Repeat(`,"x":[`, 100) + "1" + strings.Repeat("]", 100) + "}",
		`[1]`,
	} {
		if _, err := parseAll(strings.NewReader(in), maxLineText, maxSubmatches); !errors.Is(err, ErrSyntax) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("parse(%.60q) = %v, want a syntax error", in, err)
		}
	}
}

// FuzzRGJSON checks the parser's properties (see checkParse) on arbitrary
// input; the seed corpus holds real rg messages and edge cases.
func FuzzRGJSON(f *testing.F) {
	for _, line := range bytes.Split(rgOutput(f), []byte("\n")) {
		f.Add(line)
	}
	f.Add([]byte(`{"type":"match","data":{"lines":{"text":"\ud83d\ude00 \ud800 x"},"submatches":[{"start":0,"end":4}]}}`))
	f.Add([]byte(`{"type":"match","data":{"lines":{"bytes":"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 100)) + `"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
	})
}

// BenchmarkRGJSON measures the parser on rg's real output for a common
// pattern over the Go source tree.
func BenchmarkRGJSON(b *testing.B) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("rg is not installed")
	}
	cmd := exec.Command(rg, "--no-config", "--json", "--regexp=err != nil", "--", ".")
	cmd.Dir = filepath.Join(runtime.GOROOT(), "src")
	out, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ResetTimer()
	for range b.N {
		p := NewReader(bytes.NewReader(out), maxLineText, maxSubmatches)
		var ev Event
		for {
			if err := p.Next(&ev, nil); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}
