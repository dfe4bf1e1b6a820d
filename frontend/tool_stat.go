package frontend

import (
	"context"
	"fmt"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type statIn struct {
	Path       *string `json:"path,omitempty" jsonschema:"root if left out, \"\" or \".\""`
	PathBase64 *string `json:"path_base64,omitempty" jsonschema:"path as base64, for non-UTF-8 names"`
	Hash       *bool   `json:"hash,omitempty" jsonschema:"false skips the sha256 of a file (default true)"`
}

var statTool = toolDecl[statIn]{
	name:  "fs_stat",
	title: "Inspect path",
	description: "Describe one path: type, size, mtime, mode, and a file's sha256. Pass that sha256 as " +
		"if_sha256 to fs_write or fs_replace. Symlinks are not followed; path \"\" shows the confinement.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).stat,
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

func entryFields(o *obj, e *fsmcpv1.Entry) *obj {
	return o.str("type", typeName(e.GetType())).
		int("size", e.GetSize()).
		str("mtime", formatTime(e.GetMtimeUnixNano())).
		str("mode", formatMode(e.GetMode()))
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
