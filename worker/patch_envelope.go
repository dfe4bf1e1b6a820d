package worker

import (
	"bytes"
	"errors"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/envelope"
	"github.com/fsmcp/fsmcp/worker/internal/hunks"
	"github.com/fsmcp/fsmcp/worker/internal/textedit"
)

// The patch formats fs_patch reads, as its reply names them.
const (
	formatUnified  = "unified"
	formatEnvelope = "envelope"
)

// parseAny parses a patch in either format: an envelope when its first
// line that is not blank is "*** Begin Patch", else a unified diff.
func parseAny(b []byte) ([]*patchFile, string, error) {
	if envelope.Is(b) {
		files, err := parseEnvelope(b)
		return files, formatEnvelope, err
	}
	files, err := parsePatch(b)
	return files, formatUnified, err
}

// parseEnvelope turns an envelope's sections into the files fs_patch
// commits. An added file is a created one whose single chunk inserts its
// lines; a deleted one goes whatever it holds (its precondition guards
// it); an update with *** Move to: is a deletion of the old path and a
// creation of the new one, with the old file's updated content and
// permission bits, committed together.
func parseEnvelope(b []byte) ([]*patchFile, error) {
	secs, err := envelope.Parse(b)
	var pe *envelope.Error
	if errors.As(err, &pe) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "patch: not a valid *** Begin Patch envelope: %v", pe)
	}
	if err != nil {
		return nil, err
	}
	var files []*patchFile
	for _, sec := range secs {
		f := &patchFile{path: sec.Path, envelope: true}
		switch sec.Op {
		case envelope.Add:
			f.create, f.mode = true, newFileMode
			f.chunks = []envelope.Chunk{{New: sec.Lines}}
		case envelope.Delete:
			f.delete = true
		case envelope.Update:
			f.chunks = sec.Chunks
			if sec.MoveTo != "" {
				to := &patchFile{path: sec.MoveTo, create: true, envelope: true, from: f}
				f.delete, f.to = true, to
				files = append(files, f, to)
				continue
			}
		}
		files = append(files, f)
	}
	return files, nil
}

// envelopeHunks turns an envelope's chunks into hunks for data. Lines end
// as the file's do: "\r\n" when it uses "\r\n" throughout, else "\n". At
// *** End of File, a file whose last line has no newline keeps it so: the
// old and new lines' last line ending is dropped. A bare "@@" anchors
// nothing.
func envelopeHunks(chunks []envelope.Chunk, data []byte) []hunks.Hunk {
	eol := "\n"
	if textedit.AllCRLF(data) {
		eol = "\r\n"
	}
	noFinalNewline := len(data) > 0 && data[len(data)-1] != '\n'
	hs := make([]hunks.Hunk, len(chunks))
	for i, c := range chunks {
		h := &hs[i]
		h.Old, h.New = textedit.Lines(c.Old, eol), textedit.Lines(c.New, eol)
		if c.EOF && noFinalNewline && len(h.Old) > 0 {
			h.Old = bytes.TrimSuffix(h.Old, []byte(eol))
			h.New = bytes.TrimSuffix(h.New, []byte(eol))
		}
		h.AtEnd, h.After = c.EOF, -1
		for _, a := range c.Anchors {
			if a != "" {
				h.Anchors = append(h.Anchors, []byte(a))
			}
		}
		h.Name = fmt.Sprintf("chunk %d (line %d of the patch)", i+1, c.Line)
		if c.Line == 0 {
			h.Name = "the added file"
		}
	}
	return hs
}

// apply computes what the patch makes of f's current content: its new
// content, or for a moved file its new file's.
func (f *patchFile) apply() error {
	switch {
	case f.from != nil:
		// Computed with the file it moves.
		return nil
	case !f.create && !f.cur.exists:
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, f.path, "patch: %q does not exist", f.path)
	case !f.envelope:
		data, err := hunks.ApplyDiff(f.path, f.cur.data, f.frags, f.delete)
		f.data = data
		return err
	case f.delete && f.to == nil:
		return nil
	}
	data, err := hunks.Apply(f.path, f.cur.data, envelopeHunks(f.chunks, f.cur.data), false)
	if err != nil {
		return err
	}
	if f.to == nil {
		f.data = data
		return nil
	}
	f.to.data = data
	f.to.mode = f.cur.st.Mode & 0o777
	return nil
}

// hunks is how many hunks or chunks the patch has for f.
func (f *patchFile) hunks() int {
	if f.envelope {
		return len(f.chunks)
	}
	return len(f.frags)
}
