package worker

import (
	"errors"

	"github.com/fsmcp/fsmcp/proto/charset"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/textedit"
)

// checkCharset refuses a charset that is not one of charset.Names.
func checkCharset(p, cs string) error {
	if cs != "" && !charset.Known(cs) {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "unknown charset %q (known: %v)", cs, charset.Names())
	}
	return nil
}

// charsetError is err, from package charset about what (a file or an
// argument), as invalid_argument with its offset.
func charsetError(p, what string, err error) error {
	e := newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "%s: %v", what, err)
	var ce *charset.Error
	if errors.As(err, &ce) {
		off := ce.Offset
		e.Offset = &off
	}
	return e
}

// encodeText is text in the charset cs ("" is UTF-8, taken as bytes):
// what is written or matched. crlf writes each "\n" as "\r\n" first.
func encodeText(p, what, cs string, text []byte, crlf bool) ([]byte, error) {
	if cs != "" {
		// Judged on the text as given, so the offset is in it.
		if _, err := charset.Encode(cs, text); err != nil {
			return nil, charsetError(p, what, err)
		}
	}
	if crlf {
		text = textedit.CRLF(text)
	}
	if cs == "" {
		return text, nil
	}
	b, err := charset.Encode(cs, text)
	if err != nil {
		return nil, charsetError(p, what, err)
	}
	return b, nil
}

// replaceEdits is fs_replace's edits as bytes of the file data: old and
// new encoded into the charset cs, which data must round-trip through,
// and with eol "file", a "\n" written as "\r\n" when data (as text) ends
// its lines with "\r\n" throughout; a file with both endings refuses eol.
func replaceEdits(p string, data []byte, edits []*fsmcpv1.Edit, cs, eol string) ([]*fsmcpv1.Edit, error) {
	if cs == "" && eol == "" {
		return edits, nil
	}
	text := data
	if cs != "" {
		var err error
		if text, err = charset.Decode(cs, data); err != nil {
			return nil, charsetError(p, "replace: the file is not "+cs, err)
		}
	}
	crlf := false
	switch eol {
	case "":
	case "file":
		n, lf := textedit.Endings(text)
		if n > 0 && lf > 0 {
			return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p,
				"replace: eol \"file\" needs one line ending throughout, and the file mixes %d \\r\\n with %d \\n; give old and new with the endings exactly", n, lf)
		}
		crlf = n > 0
	default:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "replace: eol must be \"file\" or left out")
	}
	out := make([]*fsmcpv1.Edit, len(edits))
	for i, e := range edits {
		old, err := encodeText(p, "replace: edit old", cs, e.GetOld(), crlf)
		if err != nil {
			return nil, err
		}
		nw, err := encodeText(p, "replace: edit new", cs, e.GetNew(), crlf)
		if err != nil {
			return nil, err
		}
		out[i] = &fsmcpv1.Edit{Old: old, New: nw, All: e.GetAll()}
	}
	return out, nil
}
