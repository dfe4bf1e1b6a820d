package worker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/checkpoint"
	"github.com/fsmcp/fsmcp/worker/internal/patchlog"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Checkpoints and rewind. A checkpoint records the tree through
// fs_digest's walk and the hash cache: each directory's and regular
// file's path, mode, size and sha256, in one record in the state
// directory; no file is copied. From then on every change made through
// the tools keeps what it replaced or removed in the quarantine (as it
// always does with --quarantine), and the touch log says what the tools
// left at each path.
//
// A rewind walks the tree again the same way and compares. A path whose
// state differs from the checkpoint was changed either by the tools (the
// touch log's last record for it since the checkpoint matches what is
// there) or by something else: the host, an editor, a writable command.
// The latter is a conflict, which refuses the rewind unless keep names it
// (left as it is) or force is set (rewound; its current version kept in
// the quarantine). Each file to restore needs bytes with the checkpoint's
// sha256: a version in the quarantine, or a file of the tree with the
// same content; a path with none is lost, which force never overrides.
// The files are then committed all or none through fs_patch's journal
// (commitFiles), each taking its metadata from the kept version;
// directories made or emptied follow, after the commit.

// maxLabel bounds a checkpoint's label.
const maxLabel = 256

// maxRewindDiff bounds the text a dry run shows per file, and the file
// size it diffs.
const maxRewindDiff = 4 << 10

// dropEvicted forgets the checkpoints taken before the newest entry the
// quarantine evicted (which may have held a version they need), oldest
// first, and returns their ids.
func (s *Service) dropEvicted() []string {
	if s.cps == nil {
		return nil
	}
	return s.cps.DropBefore(s.quarantine.EvictedID())
}

func (s *Service) checkpointsAvailable(op string) error {
	if s.cps == nil {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, "", "%s: checkpoints need --quarantine and a state directory", op)
	}
	return nil
}

// Checkpoint implements fsmcpv1.WorkerServiceServer.
func (s *Service) Checkpoint(ctx context.Context, req *fsmcpv1.CheckpointRequest) (*fsmcpv1.CheckpointResponse, error) {
	if err := s.checkpointsAvailable("checkpoint"); err != nil {
		return nil, err
	}
	label := req.GetLabel()
	if len(label) > maxLabel || !utf8.ValidString(label) {
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", "checkpoint: the label must be UTF-8 of at most %d bytes", maxLabel)
	}
	rec, err := s.walkTree(ctx, "checkpoint")
	if err != nil {
		return nil, err
	}
	gone, err := s.cps.Save(rec, label)
	if err != nil {
		return nil, fsError("checkpoint", "", err)
	}
	resp := &fsmcpv1.CheckpointResponse{Checkpoint: infoProto(&rec.Info), TreeSha256: rec.TreeSHA}
	resp.EvictedCheckpoint = strings.Join(append(gone, s.dropEvicted()...), ",")
	return resp, nil
}

// walkTree records the whole tree as it is now, through the digest's walk:
// denied files (by the policy, and the call's deny lines) are left out.
func (s *Service) walkTree(ctx context.Context, op string) (*checkpoint.Record, error) {
	rec := &checkpoint.Record{}
	rec.Seq = s.quarantine.Seq()
	dg := &digester{s: s, ctx: ctx, skipDenied: true, visit: func(rel string, e checkpoint.Entry) error {
		if rel != "" {
			rec.Entries = append(rec.Entries, e)
		}
		if e.Type == checkpoint.File {
			rec.Files++
			rec.Bytes += e.Size
		}
		return nil
	}}
	sum, _, err := dg.path(".")
	if err != nil {
		return nil, fsError(op, ".", err)
	}
	rec.TreeSHA = hex.EncodeToString(sum[:])
	rec.Sort()
	return rec, nil
}

// withWalkRules gives ctx the rule context a rewind judges each name it
// changes by: the call's rules with nothing judged by
// Check (which judged only the named path), so that a deny or an ask
// line on a name beneath refuses the call (judgeCallRules).
func withWalkRules(ctx context.Context) context.Context {
	cr := callRulesOf(ctx)
	if cr == nil {
		return ctx
	}
	beneath := *cr
	beneath.judged = nil
	return context.WithValue(ctx, callRulesKey{}, &beneath)
}

func infoProto(i *checkpoint.Info) *fsmcpv1.CheckpointInfo {
	return &fsmcpv1.CheckpointInfo{Id: i.ID, Label: i.Label, Created: i.Created, Files: i.Files, Bytes: i.Bytes}
}

// Checkpoints implements fsmcpv1.WorkerServiceServer.
func (s *Service) Checkpoints(ctx context.Context, req *fsmcpv1.CheckpointsRequest) (*fsmcpv1.CheckpointsResponse, error) {
	if err := s.checkpointsAvailable("checkpoints"); err != nil {
		return nil, err
	}
	s.dropEvicted()
	resp := &fsmcpv1.CheckpointsResponse{}
	for _, info := range s.cps.Newest() {
		resp.Checkpoints = append(resp.Checkpoints, infoProto(info))
	}
	return resp, nil
}

// rewindItem is one path the rewind changes.
type rewindItem struct {
	rel        string
	want, have *checkpoint.Entry
	action     string
}

// Rewind implements fsmcpv1.WorkerServiceServer.
func (s *Service) Rewind(ctx context.Context, req *fsmcpv1.RewindRequest) (*fsmcpv1.RewindResponse, error) {
	if err := s.checkpointsAvailable("rewind"); err != nil {
		return nil, err
	}
	under, err := s.rewindScope(ctx, req.GetPath())
	if err != nil {
		return nil, err
	}
	s.dropEvicted()
	rec, err := checkpoint.Read(int(s.state.Fd()), req.GetId())
	if errors.Is(err, os.ErrNotExist) {
		// The id is echoed only when it could be one.
		id := req.GetId()
		if !checkpoint.ValidID(id) {
			id = "of that id"
		}
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, "", "rewind: no checkpoint %s (fs_checkpoints lists them; the oldest are evicted under --quarantine-bytes)", id)
	}
	if err != nil {
		return nil, fsError("rewind", "", err)
	}
	var keep []string
	for _, k := range req.GetKeep() {
		p, err := clientPath(k)
		if err != nil {
			return nil, err
		}
		keep = append(keep, strings.TrimSuffix(p, "/"))
	}
	// Check judged the named path; names beneath it are judged by the
	// rules' lines as they resolve.
	ctx = withWalkRules(ctx)
	now, err := s.walkTree(ctx, "rewind")
	if err != nil {
		return nil, err
	}
	touches, err := checkpoint.ReadTouch(int(s.state.Fd()), rec.Created)
	if err != nil {
		return nil, fsError("rewind", "", err)
	}
	want, have := rec.Lookup(), now.Lookup()
	var rels []string
	for rel := range want {
		rels = append(rels, rel)
	}
	for rel := range have {
		if want[rel] == nil {
			rels = append(rels, rel)
		}
	}
	slices.Sort(rels)
	resp := &fsmcpv1.RewindResponse{}
	var items []*rewindItem
	for _, rel := range rels {
		if !checkpoint.Within(rel, under) {
			continue
		}
		it := &rewindItem{rel: rel, want: want[rel], have: have[rel]}
		if it.action = checkpoint.Action(it.want, it.have); it.action == "" {
			continue
		}
		if slices.ContainsFunc(keep, func(k string) bool { return checkpoint.Within(rel, k) }) ||
			s.judge(ctx, "rewind", rel, rel, accessRewrite) != nil {
			resp.Kept = append(resp.Kept, []byte(rel))
			continue
		}
		if err := s.judgeRules(ctx, "rewind", rel, rel); err != nil {
			return nil, err
		}
		if it.action == "type" {
			resp.Conflicts = append(resp.Conflicts, &fsmcpv1.RewindConflict{Path: []byte(rel),
				Reason: "a directory is where the checkpoint has a file, or the reverse; rewind does not change a type"})
			continue
		}
		if !touches.Explains(rel, it.have) && !req.GetForce() && it.action != "rmdir" && it.action != "mkdir" {
			resp.Conflicts = append(resp.Conflicts, &fsmcpv1.RewindConflict{Path: []byte(rel),
				Reason: "changed since the checkpoint by something other than fsmcp's tools"})
			continue
		}
		items = append(items, it)
	}
	files, closeSources, err := s.rewindSources(ctx, items, now, resp)
	defer closeSources()
	if err != nil {
		return nil, err
	}
	lost := map[string]bool{}
	for _, c := range resp.Conflicts {
		lost[string(c.GetPath())] = c.GetLost()
	}
	for _, it := range items {
		if lost[it.rel] {
			continue // listed as a conflict
		}
		ch := &fsmcpv1.RewindChange{Path: []byte(it.rel), Action: it.action, OldSize: -1, NewSize: -1}
		if it.have != nil && it.have.Type == checkpoint.File {
			ch.OldSize = it.have.Size
		}
		if it.want != nil && it.want.Type == checkpoint.File {
			ch.NewSize = it.want.Size
		}
		resp.Changes = append(resp.Changes, ch)
	}
	if len(resp.Conflicts) > 0 {
		return resp, nil
	}
	if req.GetDryRun() {
		_, err := s.commitFiles(ctx, "rewind", files, true, func(*patchFile) error { return nil })
		if err != nil {
			return nil, err
		}
		diffs := map[string]string{}
		for _, f := range files {
			if len(f.cur.data) <= maxRewindDiff && len(f.data) <= maxRewindDiff && checkpoint.IsText(f.cur.data) && checkpoint.IsText(f.data) {
				diffs[f.path] = string(unifiedDiff(f.path, f.cur.data, f.data, f.cur.exists, !f.delete, 0))
			}
		}
		for _, ch := range resp.Changes {
			ch.Diff = diffs[string(ch.Path)]
		}
		return resp, nil
	}
	if len(items) == 0 {
		return resp, nil
	}
	gone, err := s.cps.Save(now, "before rewind to "+rec.ID)
	if err != nil {
		return nil, fsError("checkpoint", "", err)
	}
	resp.Checkpoint = now.ID
	if len(files) > 0 {
		if resp.Undo, err = s.commitFiles(ctx, "rewind", files, false, func(*patchFile) error { return nil }); err != nil {
			return nil, err
		}
	}
	if err := s.rewindDirs(ctx, items); err != nil {
		return nil, err
	}
	resp.EvictedCheckpoint = strings.Join(append(gone, s.dropEvicted()...), ",")
	return resp, nil
}

// rewindScope resolves the subtree a rewind is limited to ("" for the
// root): the named path, as the policy and the rules judge it.
func (s *Service) rewindScope(ctx context.Context, raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	p, err := clientPath(raw)
	if err != nil || p == "." {
		return "", err
	}
	d, base, err := s.openName(ctx, "rewind", p, accessMeta)
	if err != nil {
		return "", err
	}
	defer d.close()
	return joinRel(d.rel, base), nil
}

// rewindSources finds, for each file to restore, bytes with its sha256:
// a version in the quarantine or a file of the tree now (now). A file
// with none is listed in resp as lost. It returns the files to commit,
// with their content read and verified, and a func that closes the kept
// versions they take their metadata from.
func (s *Service) rewindSources(ctx context.Context, items []*rewindItem, now *checkpoint.Record, resp *fsmcpv1.RewindResponse) ([]*patchFile, func(), error) {
	var opened []*os.File
	closeAll := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	needed := map[string]int64{}
	for _, it := range items {
		if it.action == "create" || it.action == "restore" {
			needed[it.want.SHA] = it.want.Size
		}
	}
	found := map[string][]checkpoint.Kept{}
	rootFD := -1
	if len(needed) > 0 {
		root, err := s.root.Open(".")
		if err != nil {
			return nil, closeAll, fsError("rewind", ".", err)
		}
		defer root.Close()
		rootFD = int(root.Fd())
		for _, e := range now.Entries {
			if _, ok := needed[e.SHA]; ok && e.Type == checkpoint.File {
				found[e.SHA] = append(found[e.SHA], checkpoint.Kept{Dir: int(root.Fd()), Name: string(e.Path)})
			}
		}
		s.quarantine.find(ctx, s, needed, found)
	}
	reserve := func(n int64) (func(), error) { return s.reserve(ctx, "rewind", "", n) }
	var files []*patchFile
	for _, it := range items {
		f := &patchFile{path: it.rel}
		switch it.action {
		case "delete":
			f.delete, f.sha = true, it.have.SHA
		case "create", "restore", "chmod":
			f.mode = it.want.Mode
			if it.have != nil {
				f.sha = it.have.SHA
			} else {
				f.create = true
			}
			data, meta, ok := checkpoint.ReadKept(found[it.want.SHA], it.want, reserve)
			if !ok && it.have != nil && it.have.SHA == it.want.SHA {
				data, meta, ok = checkpoint.ReadKept(found[it.have.SHA], it.want, reserve)
			}
			if !ok && it.have != nil && it.have.Type == checkpoint.File && it.have.Size > it.want.Size && it.have.Mode == it.want.Mode {
				// Appended to in place since: the file itself holds the
				// checkpoint's bytes, and is cut back to them.
				data, f.cut = checkpoint.ReadPrefix(rootFD, it.rel, it.want, reserve)
				if ok = f.cut; ok {
					f.data = data
					files = append(files, f)
					continue
				}
			}
			if !ok {
				resp.Conflicts = append(resp.Conflicts, &fsmcpv1.RewindConflict{Path: []byte(it.rel), Lost: true,
					Reason: "no version with the checkpoint's content is kept (evicted, or changed outside fsmcp's tools before any tool replaced it)"})
				continue
			}
			opened = append(opened, meta)
			f.data, f.meta = data, meta
		default:
			continue
		}
		files = append(files, f)
	}
	return files, closeAll, nil
}

// find adds to found the quarantined files whose content one of needed
// (sha256 → size) names: a kept version whose sha256 the entry records,
// or, for one it does not (a deleted file or tree), a file of that size
// hashed now.
func (q *Quarantine) find(ctx context.Context, s *Service, needed map[string]int64, found map[string][]checkpoint.Kept) {
	sizes := map[int64]bool{}
	for _, size := range needed {
		sizes[size] = true
	}
	q.mu.Lock()
	var names []string
	for _, e := range q.entries {
		for _, part := range e.parts {
			if part.name == "" {
				continue
			}
			if _, ok := needed[part.keptSHA]; ok {
				found[part.keptSHA] = append(found[part.keptSHA], checkpoint.Kept{Dir: q.fd, Name: part.name})
				continue
			}
			names = append(names, part.name)
		}
	}
	q.mu.Unlock()
	checkpoint.FindBySize(ctx, q.fd, names, sizes, maxWalkDepth, func(f *os.File, st *unix.Stat_t) (string, error) { return s.hashOpen(ctx, f, st) },
		func(sum, rel string) {
			if _, ok := needed[sum]; ok {
				found[sum] = append(found[sum], checkpoint.Kept{Dir: q.fd, Name: rel})
			}
		})
}

// rewindDirs makes the directories the checkpoint has and the tree lacks
// (with their modes), gives directories their modes back, and removes,
// deepest first, the directories made since that the rewind left empty.
// These follow the files' commit: a crash between leaves directories to
// fix by rewinding again, never a file half rewound.
func (s *Service) rewindDirs(ctx context.Context, items []*rewindItem) error {
	var made []string
	for _, it := range items {
		switch it.action {
		case "mkdir", "chmod":
			if it.want.Type != checkpoint.Dir {
				continue
			}
			if err := s.root.Mkdir(it.rel, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return fsError("rewind", it.rel, err)
			}
			// By descriptor: the seccomp filter refuses chmod by path.
			d, err := s.root.OpenFile(it.rel, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
			if err == nil {
				err = unix.Fchmod(int(d.Fd()), it.want.Mode&0o7777)
				d.Close()
			}
			if err != nil {
				return fsError("rewind", it.rel, err)
			}
			made = append(made, it.rel)
		}
	}
	var gone []string
	for _, it := range slices.Backward(items) {
		if it.action != "rmdir" {
			continue
		}
		if err := s.root.Remove(it.rel); err == nil {
			gone = append(gone, it.rel)
		} else if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) && !errors.Is(err, os.ErrNotExist) {
			return fsError("rewind", it.rel, err)
		}
	}
	s.touchDirs(made, gone)
	return nil
}

// touchRel records, after a change by a tool, what is at each of rels
// (real root-relative paths) and beneath: an Absent record covering the
// whole subtree, then every file (with its sha256, through the hash
// cache) and directory there now. Nothing is recorded without a
// checkpoint.
func (s *Service) touchRel(ctx context.Context, rels ...string) {
	if !s.cps.Any() {
		return
	}
	now := time.Now().UnixNano()
	var recs []checkpoint.Touch
	for _, rel := range rels {
		if rel == "" {
			continue
		}
		recs = append(recs, checkpoint.Touch{Path: []byte(rel), Type: checkpoint.Absent, Tree: true, Time: now})
		d, err := s.openDir("touch", rel, cmp.Or(relDir(rel), "."))
		if err != nil {
			continue
		}
		dg := &digester{s: s, ctx: ctx, skipDenied: true, visit: func(r string, e checkpoint.Entry) error {
			recs = append(recs, checkpoint.Touch{Path: []byte(r), Type: e.Type, SHA: e.SHA, Time: now})
			return nil
		}}
		dg.node(d.fd, path.Base(rel), rel, rel, 0)
		d.close()
	}
	s.cps.Touch(recs)
}

// touchDirs records directories the tools made and removed.
func (s *Service) touchDirs(made, gone []string) {
	if !s.cps.Any() {
		return
	}
	now := time.Now().UnixNano()
	var recs []checkpoint.Touch
	for _, rel := range made {
		recs = append(recs, checkpoint.Touch{Path: []byte(rel), Type: checkpoint.Dir, Time: now})
	}
	for _, rel := range gone {
		recs = append(recs, checkpoint.Touch{Path: []byte(rel), Type: checkpoint.Absent, Tree: true, Time: now})
	}
	s.cps.Touch(recs)
}

// touchCommit records what a patch's commit leaves, before the journal
// is removed: each file's new content or its absence, the directories
// made and removed.
func (s *Service) touchCommit(files []*patchFile, made []string, emptied []*parent) {
	if !s.cps.Any() {
		return
	}
	now := time.Now().UnixNano()
	var recs []checkpoint.Touch
	for _, rel := range made {
		recs = append(recs, checkpoint.Touch{Path: []byte(rel), Type: checkpoint.Dir, Time: now})
	}
	for _, f := range files {
		t := checkpoint.Touch{Path: []byte(joinRel(f.dirRel, f.base)), Type: checkpoint.Absent, Time: now}
		if !f.delete {
			sum := sha256.Sum256(f.data)
			t.Type, t.SHA = checkpoint.File, hex.EncodeToString(sum[:])
		}
		recs = append(recs, t)
	}
	for _, d := range emptied {
		recs = append(recs, checkpoint.Touch{Path: []byte(d.rel), Type: checkpoint.Absent, Tree: true, Time: now})
	}
	s.cps.Touch(recs)
}

// touchJournal records what recovery put back: each entry's old state.
func (s *Service) touchJournal(j *patchlog.Journal) {
	if !s.cps.Any() {
		return
	}
	now := time.Now().UnixNano()
	var recs []checkpoint.Touch
	for _, e := range j.Entries {
		t := checkpoint.Touch{Path: []byte(joinRel(string(e.Dir), string(e.Name))), Type: checkpoint.Absent, Time: now}
		switch e.Kind {
		case "replace", "delete", "cut":
			t.Type, t.SHA = checkpoint.File, e.OldSHA
		case "rmdir":
			t.Type = checkpoint.Dir
		}
		recs = append(recs, t)
	}
	s.cps.Touch(recs)
}

// EvictedMetadata is the trailer of a call whose change evicted
// checkpoints (their ids, comma-separated).
const EvictedMetadata = "fsmcp-evicted-checkpoint"

// touchUnary records in the touch log what a change by a tool left (with
// a checkpoint to rewind to), and says in the call's trailer which
// checkpoints its change evicted.
func (s *Service) touchUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil || s.cps == nil {
		return resp, err
	}
	if dr, ok := req.(interface{ GetDryRun() bool }); ok && dr.GetDryRun() {
		return resp, err
	}
	var paths [][]byte
	switch r := req.(type) {
	case *fsmcpv1.WriteRequest:
		paths = [][]byte{r.GetPath()}
	case *fsmcpv1.ReplaceRequest:
		paths = [][]byte{r.GetPath()}
	case *fsmcpv1.SpliceRequest:
		paths = [][]byte{r.GetPath()}
	case *fsmcpv1.MkdirRequest:
		paths = [][]byte{r.GetPath()}
	case *fsmcpv1.DeleteRequest:
		paths = [][]byte{r.GetPath()}
	case *fsmcpv1.MoveRequest:
		paths = [][]byte{r.GetFrom(), r.GetTo()}
	case *fsmcpv1.CopyRequest:
		paths = [][]byte{r.GetTo()}
	case *fsmcpv1.UndoRequest:
		paths = resp.(*fsmcpv1.UndoResponse).GetPaths()
	}
	// The names a call changed are judged by the rules' lines alone (as
	// an undo's, which Check never saw): one they refuse gets no record,
	// and a rewind sees its change as a conflict.
	rctx := withWalkRules(ctx)
	var rels []string
	for _, raw := range paths {
		p, perr := clientPath(raw)
		if perr != nil || p == "." {
			continue
		}
		d, base, perr := s.openName(rctx, "touch", p, accessMeta)
		if perr != nil {
			continue
		}
		rels = append(rels, joinRel(d.rel, base))
		d.close()
	}
	s.touchRel(rctx, rels...)
	if ids := s.dropEvicted(); len(ids) > 0 {
		grpc.SetTrailer(ctx, metadata.Pairs(EvictedMetadata, strings.Join(ids, ",")))
	}
	return resp, err
}
