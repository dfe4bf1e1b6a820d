package frontend

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type statIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"root if left out, \"\" or \".\""`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Hash       *bool   `json:"hash,omitempty" jsonschema:"false skips the sha256 of a file (default true)"`
}

type listIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"root if left out, \"\" or \".\""`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Sort       *string `json:"sort,omitempty" jsonschema:"name (default), size (largest first) or mtime (newest first)"`
	Totals     *bool   `json:"totals,omitempty" jsonschema:"add totals of the whole directory: files, directories, bytes"`
	Cursor     *string `json:"cursor,omitempty" jsonschema:"cursor from a truncated reply"`
}

type readIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"file; required unless path_base64"`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Offset     *int64  `json:"offset,omitempty" jsonschema:"first byte; default 0"`
	Length     *int64  `json:"length,omitempty" jsonschema:"bytes; default: as many as one reply holds"`
	Line       *int64  `json:"line,omitempty" jsonschema:"first line instead of offset, 1-based; -1 is the last"`
	Lines      *int64  `json:"lines,omitempty" jsonschema:"with line: how many; default as many as fit"`
	IfSHA256   *string `json:"if_sha256,omitempty" jsonschema:"sha256 of an earlier reply: refused if the file changed since"`
}

func entryFields(o *obj, e *fsmcpv1.Entry) *obj {
	return o.str("type", typeName(e.GetType())).
		int("size", e.GetSize()).
		str("mtime", formatTime(e.GetMtimeUnixNano())).
		str("mode", formatMode(e.GetMode()))
}

func (s *server) stat(ctx context.Context, in *statIn, req *mcp.CallToolRequest) (*obj, error) {
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	sreq := &fsmcpv1.StatRequest{Path: p, NoHash: in.Hash != nil && !*in.Hash}
	var resp *fsmcpv1.StatResponse
	if req != nil && req.Params != nil && req.Params.GetProgressToken() != nil && !sreq.NoHash {
		// The client can follow progress: a hash running past about
		// 250 ms reports the bytes read so far.
		stream, err := s.wc.StatStream(ctx, &fsmcpv1.StatStreamRequest{Stat: sreq})
		if err != nil {
			return nil, err
		}
		notify := progressFunc(ctx, req)
		m, err := finalMessage(stream, func(pr *fsmcpv1.Progress) {
			notify(float64(pr.GetBytesHashed()), fmt.Sprintf("%d of %d bytes hashed", pr.GetBytesHashed(), pr.GetBytesTotal()))
		})
		if err != nil {
			return nil, err
		}
		resp = m.GetStat()
	} else if resp, err = s.wc.Stat(ctx, sreq); err != nil {
		return nil, err
	}
	doc := newObj().bool("ok", true).name("path", displayPath(p))
	entryFields(doc, resp.GetEntry()).int("nlink", int64(resp.GetEntry().GetNlink()))
	if resp.GetSha256() != "" {
		doc.str("sha256", resp.GetSha256())
	}
	if resp.GetHasTarget() {
		doc.name("target", resp.GetTarget())
	}
	if resp.GetTargetEscapes() {
		doc.bool("target_escapes", true)
	}
	if c := resp.GetConfinement(); c != nil {
		cd := confinementDoc(c, s.cfg.ReadOnly)
		if s.ec != nil {
			cd.object("exec", execConfinementDoc(s.ec.confinement))
		}
		doc.object("confinement", cd)
	}
	return doc, nil
}

func confinementDoc(c *fsmcpv1.Confinement, readOnly bool) *obj {
	return newObj().
		int("landlock_abi", int64(c.GetLandlockAbi())).
		int("kernel_landlock_abi", int64(c.GetKernelLandlockAbi())).
		bool("read_only", readOnly).
		bool("read_only_enforced", c.GetReadOnlyEnforced()).
		bool("network_denied", c.GetNetworkDenied()).
		str("seccomp", c.GetSeccomp()).
		int("seccomp_denied_syscalls", int64(c.GetSeccompDeniedSyscalls())).
		str("rg_version", c.GetRgVersion()).
		str("patch_journal", journalPlace(c.GetJournalOutsideRoot())).
		object("policy", newObj().
			rawValue("protect", jsonStrings(c.GetPolicy().GetProtect())).
			rawValue("deny", jsonStrings(c.GetPolicy().GetDeny())).
			rawValue("derived", derivedDoc(c.GetPolicy().GetDerived()))).
		rawValue("selftest", selftestDoc(c.GetSelftest()))
}

// jsonStrings encodes ss as a JSON array of strings.
func jsonStrings(ss []string) []byte {
	b := []byte{'['}
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendString(b, s)
	}
	return append(b, ']')
}

// selftestDoc lists the worker's start-up probes: what was tried, the
// kernel's answer, and whether it refused.
func selftestDoc(probes []*fsmcpv1.Probe) []byte {
	b := []byte{'['}
	for i, p := range probes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, newObj().str("probe", p.GetName()).str("result", p.GetResult()).bool("refused", p.GetRefused()).bytes()...)
	}
	return append(b, ']')
}

// derivedDoc is the policy's derived entries: path and derived_from.
func derivedDoc(ds []*fsmcpv1.DerivedProtect) []byte {
	b := []byte{'['}
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, newObj().str("path", d.GetPath()).str("derived_from", d.GetDerivedFrom()).bytes()...)
	}
	return append(b, ']')
}

// cursorFor encodes a continuation point; the client treats it as opaque.
func cursorFor(after []byte) string { return base64.RawURLEncoding.EncodeToString(after) }

func parseCursor(c *string) ([]byte, bool, error) {
	if c == nil {
		return nil, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(*c)
	if err != nil || len(b) == 0 {
		return nil, false, invalidf("cursor: not a cursor this server issued")
	}
	return b, true, nil
}

// pageTail is the most a truncated page adds after its last item, besides
// the cursor itself.
const pageTail = len(`],"truncated":true,"cursor":""}`)

// fs_list's cursors. A listing by name continues after the last name
// returned: its cursor is that name. One sorted by size or mtime continues
// after the last (number, name) in its order: its cursor is a NUL, the
// sort's letter, the number as a varint, then the name. A name holds no
// NUL, so neither kind passes for the other, and a cursor is refused by a
// listing of another order.
const (
	listCursorSize  = 's'
	listCursorMtime = 'm'
)

// listSorts maps the sort argument to the worker's order and the cursor's
// letter (0 for name order).
var listSorts = map[string]struct {
	order  fsmcpv1.ListingSort
	letter byte
}{
	"name":  {fsmcpv1.ListingSort_LISTING_SORT_PATH, 0},
	"size":  {fsmcpv1.ListingSort_LISTING_SORT_SIZE, listCursorSize},
	"mtime": {fsmcpv1.ListingSort_LISTING_SORT_MTIME, listCursorMtime},
}

func listCursor(letter byte, key int64, name []byte) string {
	if letter == 0 {
		return cursorFor(name)
	}
	return cursorFor(append(binary.AppendVarint([]byte{0, letter}, key), name...))
}

// parseListCursor decodes c for a listing whose cursor letter is letter,
// into the request.
func parseListCursor(c *string, letter byte, req *fsmcpv1.ListRequest) error {
	b, ok, err := parseCursor(c)
	if err != nil || !ok {
		return err
	}
	var cursorLetter byte
	if b[0] == 0 {
		if len(b) < 2 {
			return invalidf("cursor: not a cursor this server issued")
		}
		cursorLetter = b[1]
		key, n := binary.Varint(b[2:])
		if n <= 0 || (cursorLetter != listCursorSize && cursorLetter != listCursorMtime) ||
			(cursorLetter == listCursorSize && key < 0) {
			return invalidf("cursor: not a cursor this server issued")
		}
		req.AfterKey, b = key, b[2+n:]
	}
	if len(b) == 0 || bytes.IndexByte(b, 0) >= 0 || bytes.IndexByte(b, '/') >= 0 {
		return invalidf("cursor: not a cursor this server issued")
	}
	if cursorLetter != letter {
		return invalidf("cursor: it continues a listing sorted by %s; pass that sort, or no cursor", listSortName(cursorLetter))
	}
	req.After, req.HasAfter = b, true
	return nil
}

func listSortName(letter byte) string {
	for name, s := range listSorts {
		if s.letter == letter {
			return name
		}
	}
	return "name"
}

func (s *server) list(ctx context.Context, in *listIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := rootedPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	order := listSorts["name"]
	if in.Sort != nil {
		var ok bool
		if order, ok = listSorts[*in.Sort]; !ok {
			return nil, invalidf("sort must be name, size or mtime")
		}
	}
	lreq := &fsmcpv1.ListRequest{Path: p, MaxBytes: s.cfg.MaxResponseBytes, Sort: order.order, Totals: boolArg(in.Totals)}
	if err := parseListCursor(in.Cursor, order.letter, lreq); err != nil {
		return nil, err
	}
	resp, err := s.wc.List(ctx, lreq)
	if err != nil {
		return nil, err
	}
	var totals []byte
	if t := resp.GetTotals(); t != nil {
		totals = newObj().int("files", t.GetFiles()).int("directories", t.GetDirectories()).int("bytes", t.GetBytes()).bytes()
	}
	c := resp.GetColumns()
	names, ends := c.GetNames(), c.GetNameEnds()
	n := len(ends)
	if len(c.GetTypes()) != n || len(c.GetSizes()) != n || len(c.GetMtimesUnixNano()) != n || len(c.GetModes()) != n ||
		!slices.IsSorted(ends) || n > 0 && int(ends[n-1]) > len(names) {
		return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, "list: the worker's page is inconsistent")
	}
	max := int(s.cfg.MaxResponseBytes)
	// Room for what the page will most likely hold, not for the bound:
	// a short listing does not clear a whole reply's memory.
	doc := pageObj(min(max, 256+len(totals)+len(names)+n*listEntryRoom))
	doc.bool("ok", true).name("path", displayPath(p))
	doc.key("entries")
	doc.b = append(doc.b, '[')
	tail := pageTail
	if totals != nil {
		tail += len(`,"totals":`) + len(totals)
	}
	last := -1
	truncated := resp.GetMore()
	start := uint32(0)
	for i := range n {
		name := names[start:ends[i]]
		start = ends[i]
		mark := len(doc.b)
		if i > 0 {
			doc.b = append(doc.b, ',')
		}
		doc.b = appendEntry(doc.b, name, c.Types[i], c.Sizes[i], c.MtimesUnixNano[i], c.Modes[i])
		if len(doc.b)+tail+base64.RawURLEncoding.EncodedLen(len(name)+binary.MaxVarintLen64+2) > max {
			doc.b = doc.b[:mark]
			truncated = true
			break
		}
		last = i
	}
	doc.b = append(doc.b, ']')
	if totals != nil {
		doc.rawValue("totals", totals)
	}
	if truncated {
		if last < 0 {
			return nil, errf(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, "one entry does not fit in --max-response-bytes")
		}
		key := c.Sizes[last]
		if order.letter == listCursorMtime {
			key = c.MtimesUnixNano[last]
		}
		from := uint32(0)
		if last > 0 {
			from = ends[last-1]
		}
		doc.bool("truncated", true).str("cursor", listCursor(order.letter, key, names[from:ends[last]]))
	}
	return doc, nil
}

// listEntryRoom is what an entry takes besides its name, but for a name
// that needs escapes or base64: {"name":"","type":"directory","size":N,
// "mtime":"…","mode":"0755"}, with a 12-digit size.
const listEntryRoom = 112

// typeNames holds typeName of every file type.
var typeNames = func() map[fsmcpv1.FileType]string {
	m := map[fsmcpv1.FileType]string{}
	for n := range fsmcpv1.FileType_name {
		m[fsmcpv1.FileType(n)] = typeName(fsmcpv1.FileType(n))
	}
	return m
}()

// appendEntry appends one listed entry's object to b, as entryFields and
// name would write it, without building it apart first: a listing writes
// thousands.
func appendEntry(b, name []byte, typ fsmcpv1.FileType, size, mtime int64, mode uint32) []byte {
	if utf8.Valid(name) {
		b = append(b, `{"name":`...)
		b = jsontext.AppendString(b, name)
	} else {
		b = append(b, `{"name_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, name)
		b = append(b, '"')
	}
	b = append(b, `,"type":"`...)
	b = append(b, typeNames[typ]...)
	b = append(b, `","size":`...)
	b = strconv.AppendInt(b, size, 10)
	b = append(b, `,"mtime":"`...)
	b = appendTime(b, mtime)
	b = append(b, `","mode":"`...)
	m := mode & 0o7777
	b = append(b, byte('0'+m>>9), byte('0'+m>>6&7), byte('0'+m>>3&7), byte('0'+m&7))
	return append(b, `"}`...)
}

func (s *server) read(ctx context.Context, in *readIn, _ *mcp.CallToolRequest) (*obj, error) {
	p, err := requiredPath("path", in.Path, in.PathBase64)
	if err != nil {
		return nil, err
	}
	req, err := readRequest(p, in, s.cfg.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	resp, err := s.wc.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	doc, _, _ := readReply(newObj().bool("ok", true).name("path", displayPath(p)), req, in.Length, resp, int(s.cfg.MaxResponseBytes), defaultBinaryPage)
	return doc, nil
}

// readRequest checks a read's arguments and builds its request, asking for
// at most bound bytes.
func readRequest(p []byte, in *readIn, bound int64) (*fsmcpv1.ReadRequest, error) {
	req := &fsmcpv1.ReadRequest{Path: p, Length: bound}
	if in.Offset != nil {
		req.Offset = *in.Offset
	}
	if in.Length != nil {
		req.Length = min(*in.Length, bound)
	}
	if req.Offset < 0 || req.Length < 0 {
		return nil, invalidf("offset and length must not be negative")
	}
	if in.Line != nil {
		switch {
		case in.Offset != nil:
			return nil, invalidf("give line or offset, not both")
		case in.Length != nil:
			return nil, invalidf("with line, give lines (a count of lines), not length")
		case *in.Line == 0:
			return nil, invalidf("line is 1-based; -1 is the last line")
		}
		req.ByLine, req.Line = true, *in.Line
	}
	if in.Lines != nil {
		if in.Line == nil {
			return nil, invalidf("lines needs line")
		}
		if req.Lines = *in.Lines; req.Lines < 1 {
			return nil, invalidf("lines must be at least 1")
		}
	}
	if in.IfSHA256 != nil {
		if len(*in.IfSHA256) != 64 || !isLowerHex(*in.IfSHA256) {
			return nil, invalidf("if_sha256 must be 64 lowercase hex digits")
		}
		req.IfSha256 = *in.IfSHA256
	}
	return req, nil
}

// readOverhead is the most a read reply's fields other than path and
// content take, with room for the largest numbers.
const readOverhead = len(`,"content":"","encoding":"base64","offset":,"length":,"size":,"eof":false,"truncated":true,"next_offset":`+
	`,"first_line":,"line_count":,"next_line":,"text_truncated":true,"line_length":,"binary":true,"sha256":""`) + 8*20 + 64

// defaultBinaryPage is the most a read without length answers of bytes
// that are not UTF-8 text: 4 KiB, 5.5 KB of base64.
const defaultBinaryPage = 4096

// readReply completes head, which holds the fields before the content,
// with the worker's reply to req, fitted into max bytes; of bytes that are
// not text, read without length, at most binaryPage (0: no such bound).
// A line read is cut after a whole line; only a first line that does not
// fit alone is cut inside, on a character boundary, and says
// text_truncated.
func readReply(head *obj, req *fsmcpv1.ReadRequest, length *int64, resp *fsmcpv1.ReadResponse, max int, binaryPage int) (doc *obj, n int, truncated bool) {
	data := resp.GetData()
	size, offset := resp.GetSize(), resp.GetOffset()
	asked := size - offset
	if length != nil {
		asked = min(*length, asked)
	}
	if int64(len(data)) < asked && !req.GetByLine() {
		// The worker stopped at its bound, not where the client asked:
		// don't let that cut turn a UTF-8 range into base64.
		data = trimPartialRune(data)
	}
	avail := max - head.size() - readOverhead
	n, encoded, encoding := fitContent(data, avail)
	shortBinary := false
	if binaryPage > 0 && encoding == "base64" && length == nil && !req.GetByLine() && n > binaryPage {
		// Bytes that are not text are a poor use of an agent's context:
		// without length, a short page, and the reply says so.
		n, encoded, encoding = fitContent(data[:binaryPage], avail)
		shortBinary = true
	}
	ends := resp.GetLineEnds()
	lineCount := 0
	if req.GetByLine() {
		// The whole lines that fit: shortening a range can change its
		// encoding, so fit again until the cut stays on a line end.
		lineCount = sort.Search(len(ends), func(i int) bool { return ends[i] > int64(n) })
		for lineCount > 0 && ends[lineCount-1] != int64(n) {
			n, encoded, encoding = fitContent(data[:ends[lineCount-1]], avail)
			lineCount = sort.Search(len(ends), func(i int) bool { return ends[i] > int64(n) })
		}
		if lineCount == 0 && n > 0 {
			// One line, cut: its first bytes, labelled.
			lineCount = 1
		}
	}
	data = data[:n]
	doc = head
	// The whole document in one allocation: the page is not copied over
	// and over as it grows.
	doc.b = slices.Grow(doc.b, readOverhead+encoded)
	doc.key("content")
	if encoding == "utf8" {
		doc.b = jsontext.AppendString(doc.b, data)
	} else {
		doc.b = append(doc.b, '"')
		doc.b = base64.StdEncoding.AppendEncode(doc.b, data)
		doc.b = append(doc.b, '"')
	}
	end := offset + int64(n)
	eof := end >= size
	doc.str("encoding", encoding).int("offset", offset).int("length", int64(n)).int("size", size).bool("eof", eof)
	cutLine := req.GetByLine() && lineCount > 0 && (len(ends) == 0 || ends[0] > int64(n))
	truncated = !req.GetByLine() && int64(n) < asked ||
		req.GetByLine() && !eof && (req.GetLines() == 0 || int64(lineCount) < req.GetLines() || cutLine)
	if truncated {
		doc.bool("truncated", true)
	}
	if !eof {
		doc.int("next_offset", end)
	}
	if req.GetByLine() {
		doc.int("first_line", resp.GetFirstLine()).int("line_count", int64(lineCount))
		lineEnd := end
		if cutLine {
			lineLen := resp.GetLineLength()
			if len(ends) > 0 {
				lineLen = ends[0]
			}
			lineEnd = offset + lineLen
			doc.bool("text_truncated", true).int("line_length", lineLen)
		}
		if lineEnd < size {
			doc.int("next_line", resp.GetFirstLine()+int64(lineCount))
		}
	}
	if shortBinary {
		doc.bool("binary", true)
	}
	if shortBinary {
		doc.bool("binary", true)
	}
	if resp.GetSha256() != "" {
		doc.str("sha256", resp.GetSha256())
	} else {
		doc.bool("sha256_omitted", true)
	}
	return doc, n, truncated
}

// fitContent returns how many leading bytes of data fit in avail bytes of
// encoded JSON string content, their encoded length, and the encoding
// judged on exactly those bytes: utf8 if valid UTF-8, else base64. A UTF-8
// range is cut only at a rune boundary, so the shortened range stays valid.
func fitContent(data []byte, avail int) (n, encoded int, encoding string) {
	if avail < 0 {
		avail = 0
	}
	if !utf8.Valid(data) {
		n := min(len(data), avail/4*3)
		if !utf8.Valid(data[:n]) {
			return n, base64.StdEncoding.EncodedLen(n), "base64"
		}
		data = data[:n]
	}
	// data is valid UTF-8: a multi-byte rune costs its bytes, an ASCII
	// byte its escape. Past the budget, the cut backs up to the start of
	// the rune that did not fit.
	used := 0
	for i := 0; i < len(data); i++ {
		// A word of bytes that need no escape costs its length.
		for i+8 <= len(data) && used+8 <= avail && jsontext.PlainWord(jsontext.Load64(data, i)) {
			i, used = i+8, used+8
		}
		if i == len(data) {
			break
		}
		c := data[i]
		cost := escapedLen(c)
		if used+cost > avail {
			for i > 0 && !utf8.RuneStart(data[i]) {
				i--
				used--
			}
			return i, used, "utf8"
		}
		used += cost
	}
	return len(data), used, "utf8"
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of data.
func trimPartialRune(data []byte) []byte {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return data[:i]
			}
			break
		}
	}
	return data
}
