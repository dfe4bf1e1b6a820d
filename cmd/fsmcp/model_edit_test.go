package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strings"
)

// The model's editing steps: append, fs_splice, fs_copy, fs_patch (as a
// unified diff or a *** Begin Patch envelope), fs_write with charset and
// fs_replace with eol, predicted from the model as the other steps are.

// setContent encodes b into args[key], as base64 when it is not text.
func setContent(args map[string]any, key string, b []byte) {
	if isText(b) {
		args[key] = string(b)
		return
	}
	args[key] = base64.StdEncoding.EncodeToString(b)
	args["encoding"] = "base64"
}

// wantResult checks a success's sha256 and size against content.
func wantResult(content []byte) func(reply) string {
	return func(r reply) string {
		if r.str("sha256") != sha(content) || r.num("size") != int64(len(content)) {
			return fmt.Sprintf("want sha256 %s, size %d", sha(content), len(content))
		}
		return ""
	}
}

func (g *modelGen) appendOp() *modelOp {
	m := g.m
	p := g.path(70, 20, isFile)
	spelled := g.spell(p, true)
	add := g.content(0, 6)
	args := map[string]any{"path": spelled, "append": true}
	setContent(args, "content", add)
	ifSHA, malformed := g.precondition(p)
	args["if_sha256"] = ifSHA
	op := &modelOp{tool: "fs_write", args: args}
	if g.refusedEdit(op, p, spelled, ifSHA, malformed) {
		return op
	}
	result := add
	if n := m[p]; n != nil {
		result = append(bytes.Clone(n.content), add...)
	}
	op.check = wantResult(result)
	op.apply = g.setFile(p, result)
	return op
}

func (g *modelGen) spliceOp() *modelOp {
	m := g.m
	p := g.path(85, 10, isFile)
	spelled := g.spell(p, true)
	n := m[p]
	size := 0
	if n != nil && !n.dir {
		size = len(n.content)
	}
	offset := g.rng.IntN(size + 2) // sometimes one past the end
	del := g.rng.IntN(3)
	insert := g.content(0, 4)
	args := map[string]any{"path": spelled, "offset": offset}
	if del > 0 || g.pct(20) {
		args["delete"] = del
	}
	if len(insert) > 0 || g.pct(20) {
		setContent(args, "insert", insert)
	}
	ifSHA, malformed := g.precondition(p)
	args["if_sha256"] = ifSHA
	op := &modelOp{tool: "fs_splice", args: args}
	switch {
	case g.refusedEdit(op, p, spelled, ifSHA, malformed):
	case offset > size || del > size-offset:
		op.want = "invalid_argument"
	default:
		var cur []byte
		if n != nil {
			cur = n.content
		}
		result := slices.Concat(cur[:offset], insert, cur[offset+del:])
		op.check = wantResult(result)
		op.apply = g.setFile(p, result)
	}
	return op
}

func (g *modelGen) copyOp() *modelOp {
	m := g.m
	from := g.path(85, 0, anyNode)
	to := g.destination(from, 30, 40, 45)
	recursive := g.pct(60)
	sFrom, sTo := g.spell(from, false), g.spell(to, false)
	args := map[string]any{"from": sFrom, "to": sTo}
	if recursive || g.pct(20) {
		args["recursive"] = recursive
	}
	op := &modelOp{tool: "fs_copy", args: args}
	src := m[from]
	toDir := dirOf(to)
	switch {
	case m.parentCode(sFrom) != "":
		op.want = m.parentCode(sFrom)
	case m.parentCode(sTo) != "":
		op.want = m.parentCode(sTo)
	case m[to] != nil:
		op.want = "already_exists"
	case src == nil:
		op.want = "not_found"
	case src.dir && !recursive:
		op.want = "is_a_directory"
	case src.dir && (toDir == from || strings.HasPrefix(toDir, from+"/")):
		op.want = "invalid_argument"
	default:
		op.apply = func() {
			for _, q := range m.subtree(from) {
				c := *m[q]
				c.content = bytes.Clone(c.content)
				m[to+strings.TrimPrefix(q, from)] = &c
			}
		}
	}
	return op
}

// linesOf is b as diff lines with prefix, b ending in a newline.
func linesOf(prefix string, b []byte) string {
	var s strings.Builder
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if len(l) > 0 {
			s.WriteString(prefix + string(l))
		}
	}
	return s.String()
}

// patchOp patches one or two files: a whole-content rewrite of a text file
// ending in a newline (whose old lines can only match at its start), a
// created file or a deleted one (whose directory goes if that leaves it
// empty), with at most one wrong precondition.
func (g *modelGen) patchOp() *modelOp {
	m := g.m
	var candidates []string
	for p, n := range m {
		if p != "." && !n.dir && len(n.content) > 0 && n.content[len(n.content)-1] == '\n' && isText(n.content) && !bytes.Contains(n.content, []byte("\r")) {
			candidates = append(candidates, p)
		}
	}
	slices.Sort(candidates)
	var patch, env strings.Builder
	useEnv := g.pct(40)
	pre := map[string]any{}
	var applies []func()
	want := ""
	var wrong func()
	touched := map[string]bool{}
	for range 1 + g.rng.IntN(2) {
		newText := []byte(strings.ReplaceAll(string(g.content(1, 8)), "\r", "") + "\n")
		if !isText(newText) {
			newText = []byte("x\n")
		}
		if len(candidates) > 0 && g.pct(75) {
			p := candidates[g.rng.IntN(len(candidates))]
			if touched[p] {
				continue
			}
			touched[p] = true
			n := m[p]
			old := n.content
			pre[p] = sha(old)
			if g.pct(30) {
				fmt.Fprintf(&patch, "--- a/%s\n+++ /dev/null\n@@ -1,%d +0,0 @@\n%s", p, bytes.Count(old, []byte("\n")), linesOf("-", old))
				fmt.Fprintf(&env, "*** Delete File: %s\n", p)
				applies = append(applies, func() { delete(m, p) })
			} else {
				fmt.Fprintf(&patch, "--- a/%s\n+++ b/%s\n@@ -1,%d +1,%d @@\n%s%s", p, p, bytes.Count(old, []byte("\n")),
					bytes.Count(newText, []byte("\n")), linesOf("-", old), linesOf("+", newText))
				fmt.Fprintf(&env, "*** Update File: %s\n@@\n%s%s", p, linesOf("-", old), linesOf("+", newText))
				applies = append(applies, func() { n.content = newText })
			}
			if wrong == nil && g.pct(10) {
				wrong = func() { pre[p] = sha(append(bytes.Clone(old), 'z')) }
			}
			continue
		}
		p := g.freshPath()
		if touched[p] || m[p] != nil || m.parentCode(p) != "" {
			continue
		}
		touched[p] = true
		pre[p] = nil
		fmt.Fprintf(&patch, "--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n%s", p, bytes.Count(newText, []byte("\n")), linesOf("+", newText))
		fmt.Fprintf(&env, "*** Add File: %s\n%s", p, linesOf("+", newText))
		applies = append(applies, func() { m[p] = &mnode{mode: 0o644, content: newText} })
	}
	if patch.Len() == 0 {
		return g.write()
	}
	if wrong != nil {
		wrong()
		want = "precondition_failed"
	}
	text := patch.String()
	if useEnv {
		text = "*** Begin Patch\n" + env.String() + "*** End Patch\n"
	}
	op := &modelOp{tool: "fs_patch", args: map[string]any{"patch": text, "if_sha256": pre}, want: want}
	if want == "" {
		op.apply = func() {
			for _, a := range applies {
				a()
			}
			// As git apply does, the directories the deletions leave
			// empty go.
			for p := range touched {
				for d := path.Dir(p); m[p] == nil && d != "." && m[d] != nil && !m.hasChildren(d); d = path.Dir(d) {
					delete(m, d)
				}
			}
		}
	}
	return op
}

// latin1 is text in Latin-1, written out rune by rune (each rune below
// U+0100 is its own byte); false when a rune is not Latin-1.
func latin1(s string) ([]byte, bool) {
	var b []byte
	for _, r := range s {
		if r > 0xff {
			return nil, false
		}
		b = append(b, byte(r))
	}
	return b, true
}

// charsetWriteOp writes text with charset latin1: its bytes are the
// Latin-1 ones (not UTF-8); sometimes with CRLF line ends, and sometimes
// with a character Latin-1 cannot hold, which is refused before the path
// is resolved.
func (g *modelGen) charsetWriteOp() *modelOp {
	p := g.path(40, 30, isFile)
	spelled := g.spell(p, true)
	eol := "\n"
	if g.pct(50) {
		eol = "\r\n"
	}
	var s strings.Builder
	for range g.rng.IntN(8) {
		s.WriteString([]string{"x", "é", "ñ", "y"}[g.rng.IntN(4)])
		if g.pct(40) {
			s.WriteString(eol)
		}
	}
	if g.pct(10) {
		s.WriteString("€")
	}
	args := map[string]any{"path": spelled, "content": s.String(), "charset": "latin1"}
	ifSHA, malformed := g.precondition(p)
	args["if_sha256"] = ifSHA
	op := &modelOp{tool: "fs_write", args: args}
	enc, ok := latin1(s.String())
	if !ok {
		op.want = "invalid_argument"
		return op
	}
	if g.refusedEdit(op, p, spelled, ifSHA, malformed) {
		return op
	}
	op.check = wantResult(enc)
	op.apply = g.setFile(p, enc)
	return op
}

// modelCRLF writes each "\n" not preceded by "\r" as "\r\n".
func modelCRLF(b []byte) []byte {
	var out []byte
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, c)
	}
	return out
}

// eolReplaceOp replaces a line of a file, typed with "\n", with eol
// "file": on a file that ends its lines with "\r\n" throughout the "\n"
// stands for "\r\n"; a file with both endings is refused.
func (g *modelGen) eolReplaceOp() *modelOp {
	m := g.m
	p := g.path(85, 5, isFile)
	spelled := g.spell(p, true)
	var cur []byte
	if n := m[p]; n != nil && !n.dir {
		cur = n.content
	}
	old := []byte("x\n")
	if lines := bytes.SplitAfter(cur, []byte("\n")); len(cur) > 0 && g.pct(80) {
		l := lines[g.rng.IntN(len(lines))]
		if bytes.HasSuffix(l, []byte("\n")) && isText(l) {
			old = append(bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r")), '\n')
		}
	}
	nw := []byte([]string{"y\n", "yy\nx\n", ""}[g.rng.IntN(3)])
	args := map[string]any{"path": spelled, "eol": "file", "edits": []any{map[string]any{"old": string(old), "new": string(nw)}}}
	ifSHA, malformed := g.precondition(p)
	args["if_sha256"] = ifSHA
	op := &modelOp{tool: "fs_replace", args: args}
	n := m[p]
	switch {
	case malformed:
		op.want = "invalid_argument"
		return op
	case m.parentCode(spelled) != "":
		op.want = m.parentCode(spelled)
		return op
	case n != nil && n.dir:
		op.want = "is_a_directory"
		return op
	case n == nil && ifSHA == nil:
		op.want = "not_found"
		return op
	case n == nil:
		op.want, op.check = "precondition_failed", wantCurrent("")
		return op
	case ifSHA == nil || ifSHA != sha(n.content):
		op.want, op.check = "precondition_failed", wantCurrent(sha(n.content))
		return op
	}
	crlf := bytes.Count(cur, []byte("\r\n"))
	lf := bytes.Count(cur, []byte("\n")) - crlf
	switch {
	case crlf > 0 && lf > 0:
		op.want = "invalid_argument"
		return op
	case crlf > 0:
		old, nw = modelCRLF(old), modelCRLF(nw)
	}
	switch bytes.Count(cur, old) {
	case 0:
		op.want = "no_match"
	case 1:
		result := bytes.Replace(cur, old, nw, 1)
		op.check = wantResult(result)
		op.apply = g.setFile(p, result)
	default:
		op.want = "ambiguous_match"
	}
	return op
}
