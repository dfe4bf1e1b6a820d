package worker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/envelope"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// patchFile is one file of a patch, from parsing to commit.
type patchFile struct {
	path           string // the client path, as the patch names it
	create, delete bool
	mode           uint32 // of a created file
	frags          []*gitdiff.TextFragment
	// envelope: the file comes from an envelope, whose chunks change it.
	// to is the new file of an update that moves it (this file is then
	// deleted), and from, on that new file, the one it moves.
	envelope bool
	chunks   []envelope.Chunk
	to, from *patchFile
	sha      string // the precondition: the current sha256, "" for must not exist
	// unchecked: a dry run given no precondition for the file, which
	// then only has to exist (or, created, not exist).
	unchecked bool

	d    *parent
	base string
	key  lockKey
	cur  *current
	// dirRel is the real root-relative path of the file's directory;
	// mkdirs, for a created file, the directories beneath d the patch
	// makes first (d is then the nearest one that exists, and dirRel the
	// last one made). td is the directory the temp name is in: d, except
	// for a file created in directories the patch makes (staged in the
	// nearest one that exists) and a deleted file whose directory the
	// patch removes (moved aside to the nearest one it keeps).
	dirRel string
	mkdirs []string
	td     *parent
	data   []byte // the new content
	// st is the staged new content (not for a deletion); tmp is its temp
	// name, or for a deletion the temp name the old file moves to.
	st            *staged
	tmp           string
	brokeHardLink bool
	// qname is the old version's name in the quarantine, with one (not
	// for a created file).
	qname string
	// meta, when set, gives the new file its metadata (body.meta).
	meta *os.File
	// cut: the file keeps its first len(data) bytes in place (the same
	// inode) and the bytes past them go into the quarantine under qname:
	// a rewind across an in-place append.
	cut bool
}

// Patch implements fsmcpv1.WorkerServiceServer. It applies a unified diff
// (as diff -u and git diff write them) or a "*** Begin Patch" envelope to
// every file it names, or to none: parsed by go-gitdiff or the envelope
// package, applied by applyChanges with no fuzz, committed by commitAll
// through a journal that a crash leaves for the next start to undo.
func (s *Service) Patch(ctx context.Context, req *fsmcpv1.PatchRequest) (*fsmcpv1.PatchResponse, error) {
	files, format, err := parseAny(req.GetPatch())
	if err != nil {
		return nil, err
	}
	if err := matchPreconditions(files, req.GetPreconditions(), req.GetDryRun()); err != nil {
		return nil, err
	}
	resp := &fsmcpv1.PatchResponse{Format: format}
	resp.Undo, err = s.commitFiles(ctx, "patch", files, req.GetDryRun(), (*patchFile).apply)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		pf := &fsmcpv1.PatchFile{Path: []byte(f.path), Created: f.create, Deleted: f.delete,
			Hunks: int64(f.hunks()), BrokeHardLink: f.brokeHardLink}
		if f.to != nil {
			pf.MovedTo = []byte(f.to.path)
		}
		if !f.delete {
			sum := sha256.Sum256(f.data)
			pf.Sha256, pf.Size = hex.EncodeToString(sum[:]), int64(len(f.data))
		}
		if req.GetDryRun() {
			pf.CurrentSha256 = f.cur.sha
			if f.from != nil {
				// A moved file's diff is from the file it was.
				pf.Diff = unifiedDiff(f.path, f.from.cur.data, f.data, true, true, 0)
			} else {
				pf.Diff = unifiedDiff(f.path, f.cur.data, f.data, f.cur.exists, !f.delete, 0)
			}
		}
		resp.Files = append(resp.Files, pf)
	}
	return resp, nil
}

// commitFiles opens the files (as openName does for a rewrite, making
// missing directories for a created file), locks them in the fixed order,
// checks each one's precondition (f.sha), has content give each its new
// content (from f.cur), and unless dryRun commits them all or none
// through commitAll. It returns commitAll's undo token. op names the tool
// in errors.
func (s *Service) commitFiles(ctx context.Context, op string, files []*patchFile, dryRun bool, content func(*patchFile) error) (string, error) {
	var err error
	// Shared: a patch renames only files, never a directory (it makes
	// and removes only empty ones).
	unlockRenames := s.lockRenames(false)
	defer unlockRenames()
	for _, f := range files {
		d, base, err := s.openName(ctx, op, f.path, accessRewrite)
		if err != nil && f.create {
			d, base, err = s.openMissing(ctx, f, err)
		}
		if err != nil {
			return "", err
		}
		defer d.close()
		f.d, f.base, f.td = d, base, d
		f.dirRel = d.rel
		for _, m := range f.mkdirs {
			f.dirRel = joinRel(f.dirRel, m)
		}
		f.key = lockKey{d.st.Dev, d.st.Ino, strings.Join(append(slices.Clone(f.mkdirs), base), "/")}
		// What the patch replaces or deletes must be able to go into the
		// quarantine by a rename.
		if !f.create && !s.quarantine.sameFS(d.st.Dev) {
			return "", errOtherFS(op, f.path)
		}
	}
	// The fixed order: by directory inode and name. Locks are taken in it
	// (so two patches never wait for each other in a cycle) and files are
	// committed in it.
	order := slices.Clone(files)
	slices.SortFunc(order, func(a, b *patchFile) int {
		return cmp3(a.key, b.key)
	})
	for i := 1; i < len(order); i++ {
		if order[i].key == order[i-1].key {
			return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, order[i].path,
				"patch: %q and %q name the same file", order[i-1].path, order[i].path)
		}
	}
	for _, f := range order {
		unlock, err := s.locks.lock(ctx, f.key)
		if err != nil {
			return "", fsError(op, f.path, err)
		}
		defer unlock()
	}
	for _, f := range order {
		cur := &current{}
		if len(f.mkdirs) == 0 {
			if cur, err = s.current(ctx, op, f.d, f.base, f.path, true); err != nil {
				return "", err
			}
		}
		defer cur.close()
		f.cur = cur
		if f.unchecked && !f.create && cur.exists {
			// A dry run without the precondition: the file as it is.
			f.sha = cur.sha
		}
		if err := cur.check(f.path, f.sha); err != nil {
			return "", err
		}
	}
	// After every check: a moved file's content is computed with the
	// file it moves.
	for _, f := range files {
		if err := content(f); err != nil {
			return "", err
		}
	}
	emptied, closeDirs, err := s.emptiedDirs(ctx, files)
	if err != nil {
		return "", err
	}
	defer closeDirs()
	if dryRun {
		return "", nil
	}
	return s.commitAll(ctx, order, emptied)
}

// openMissing resolves a file the patch creates in a directory that does
// not exist (openName's error nf says so): it returns the nearest
// directory of its path that exists, and sets f.mkdirs to the ones
// beneath it the commit makes, as git apply does. The file's real path is
// judged as openName would, before anything is made.
func (s *Service) openMissing(ctx context.Context, f *patchFile, nf error) (*parent, string, error) {
	var e *Error
	dir, base := path.Split(f.path)
	comps := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	if !errors.As(nf, &e) || e.Code != fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND || dir == "" || slices.Contains(comps, "..") {
		return nil, "", missingDirectory(nf, f.path)
	}
	for i := len(comps) - 1; i >= 0; i-- {
		d, err := s.openDir("patch", f.path, cmp.Or(strings.Join(comps[:i], "/"), "."))
		if errors.As(err, &e) && e.Code == fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		// The policy covers everything beneath a directory it names, so
		// judging the file judges every directory made for it.
		rel := d.rel
		for _, c := range append(slices.Clone(comps[i:]), base) {
			if c != "" && c != "." {
				rel = joinRel(rel, c)
			}
		}
		if err == nil {
			err = s.judge(ctx, "patch", f.path, rel, accessRewrite)
		}
		if err == nil {
			err = s.judgeRules(ctx, "patch", f.path, rel)
		}
		if err != nil {
			d.close()
			return nil, "", err
		}
		for _, c := range comps[i:] {
			if c != "" && c != "." {
				f.mkdirs = append(f.mkdirs, c)
			}
		}
		return d, base, nil
	}
	return nil, "", missingDirectory(nf, f.path)
}

// emptiedDirs finds the directories the patch's deletions leave empty,
// deepest first, as git apply removes them: a directory (not the root)
// whose every entry the patch deletes or leaves empty, and beneath which
// the patch creates nothing. (The policy judged the files: it covers
// everything beneath a directory it names.) A deleted file in one gets
// the nearest directory the patch keeps as its td.
// The returned close closes them and the tds it opened.
func (s *Service) emptiedDirs(ctx context.Context, files []*patchFile) (_ []*parent, closeAll func(), _ error) {
	gone := map[string]map[string]bool{}
	keep := map[string]bool{}
	deepest := 0
	for _, f := range files {
		if f.create {
			for r := f.dirRel; r != ""; r = relDir(r) {
				keep[r] = true
			}
		}
		if !f.delete {
			continue
		}
		if gone[f.dirRel] == nil {
			gone[f.dirRel] = map[string]bool{}
		}
		gone[f.dirRel][f.base] = true
		deepest = max(deepest, strings.Count(f.dirRel, "/")+1)
	}
	var emptied, opened []*parent
	closeAll = func() {
		for _, d := range append(emptied, opened...) {
			d.close()
		}
	}
	fail := func(err error) ([]*parent, func(), error) {
		closeAll()
		return nil, nil, err
	}
	removed := map[string]bool{}
	for depth := deepest; depth > 0; depth-- {
		for _, rel := range slices.Sorted(maps.Keys(gone)) {
			if rel == "" || keep[rel] || strings.Count(rel, "/")+1 != depth {
				continue
			}
			d, err := s.openDir("patch", rel, rel)
			if err != nil {
				return fail(err)
			}
			names, err := d.f.Readdirnames(-1)
			if err != nil {
				d.close()
				return fail(fsError("patch", rel, err))
			}
			all := len(names) > 0
			for _, n := range names {
				all = all && gone[rel][n]
			}
			if !all {
				d.close()
				continue
			}
			emptied = append(emptied, d)
			removed[rel] = true
			up := relDir(rel)
			if gone[up] == nil {
				gone[up] = map[string]bool{}
			}
			gone[up][path.Base(rel)] = true
		}
	}
	for _, f := range files {
		if !f.delete || !removed[f.dirRel] {
			continue
		}
		up := f.dirRel
		for removed[up] {
			up = relDir(up)
		}
		td, err := s.openDir("patch", f.path, cmp.Or(up, "."))
		if err != nil {
			return fail(err)
		}
		opened = append(opened, td)
		f.td = td
	}
	return emptied, closeAll, nil
}

// relDir is the directory of a root-relative path, "" for the root.
func relDir(rel string) string {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ""
	}
	return rel[:i]
}

func cmp3(a, b lockKey) int {
	switch {
	case a.dev != b.dev:
		return cmpU(a.dev, b.dev)
	case a.ino != b.ino:
		return cmpU(a.ino, b.ino)
	}
	return strings.Compare(a.name, b.name)
}

func cmpU(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// parsePatch parses a unified diff into its files. Names are as git writes
// them (go-gitdiff strips the a/ and b/ of a git diff); in a diff without
// git's headers (diff -u), a leading a/ or b/ is stripped as patch -p1
// would, and any other name is taken as it is (-p0). Binary patches,
// renames, copies and mode changes are refused: fs_move and fs_copy do
// those.
func parsePatch(b []byte) ([]*patchFile, error) {
	invalid := func(format string, args ...any) error {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, "", format, args...)
	}
	if len(b) == 0 {
		return nil, invalid("patch: the patch is empty")
	}
	gfs, _, err := gitdiff.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, invalid("patch: not a unified diff: %v", err)
	}
	if len(gfs) == 0 {
		return nil, invalid("patch: no file diff found (want --- / +++ headers and @@ hunks, as diff -u or git diff write them)")
	}
	isGit := bytes.HasPrefix(b, []byte("diff --git ")) || bytes.Contains(b, []byte("\ndiff --git "))
	var files []*patchFile
	for _, g := range gfs {
		name := g.NewName
		if g.IsDelete {
			name = g.OldName
		}
		if !isGit {
			// One prefix: "a/b/x" is b/x.
			if rest, ok := strings.CutPrefix(name, "a/"); ok {
				name = rest
			} else {
				name = strings.TrimPrefix(name, "b/")
			}
		}
		unsup := func(what string) error {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_UNSUPPORTED, name, "patch: %s is not applied (nothing was changed)", what)
		}
		switch {
		case name == "":
			return nil, invalid("patch: a file diff names no file")
		case g.IsBinary:
			return nil, unsup("a binary diff")
		case g.IsRename || g.IsCopy:
			return nil, unsup("a rename or copy (use fs_move or fs_copy)")
		case !g.IsNew && !g.IsDelete && g.OldMode != 0 && g.NewMode != 0 && g.OldMode != g.NewMode:
			return nil, unsup("a mode change")
		}
		f := &patchFile{path: name, create: g.IsNew, delete: g.IsDelete, frags: g.TextFragments}
		if g.IsNew {
			switch perm := uint32(g.NewMode.Perm()); perm {
			case 0, newFileMode:
				f.mode = newFileMode
			case 0o755:
				f.mode = 0o755
			default:
				return nil, unsup("a new file of mode " + modeString(perm))
			}
		}
		files = append(files, f)
	}
	return files, nil
}

// matchPreconditions gives each file its precondition. Every file needs
// one (except in a dry run, which checks those it is given), of the right
// kind (null for a file the patch creates, a hash for one it changes or
// deletes), and none may name a file the patch does not touch.
func matchPreconditions(files []*patchFile, pre []*fsmcpv1.PatchPrecondition, dryRun bool) error {
	byPath := map[string]*fsmcpv1.PatchPrecondition{}
	for _, c := range pre {
		p, err := clientPath(c.GetPath())
		if err != nil {
			return err
		}
		if err := checkPrecondition(p, c.GetSha256(), c.GetMustNotExist()); err != nil {
			return err
		}
		if _, dup := byPath[p]; dup {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p,
				"patch: the preconditions name %q twice (in if_sha256 and if_sha256_base64, or as two spellings); give each path once", p)
		}
		byPath[p] = c
	}
	for _, f := range files {
		c, ok := byPath[f.path]
		switch {
		case !ok && dryRun:
			f.unchecked = true
			continue
		case !ok:
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, f.path,
				"patch: if_sha256 has no entry for %q, which the patch touches (its sha256, or null if the patch creates it; "+
					"if_sha256_base64 carries names that are not UTF-8)", f.path)
		case f.create && !c.GetMustNotExist():
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, f.path, "patch: the patch creates %q, so its if_sha256 must be null", f.path)
		case !f.create && c.GetMustNotExist():
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, f.path, "patch: the patch changes %q, so its if_sha256 must be its sha256, not null", f.path)
		}
		f.sha = c.GetSha256()
		delete(byPath, f.path)
	}
	for p := range byPath {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "patch: if_sha256 names %q, which the patch does not touch", p)
	}
	return nil
}

// placeDeletion moves the file f deletes aside to its temp name in f.td, where the
// journal can find it until the commit, and checks that what moved is the
// file that was read and has not been written since.
func (s *Service) placeDeletion(f *patchFile) error {
	if err := unix.Renameat2(f.d.fd, f.base, f.td.fd, f.tmp, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, f.path, "patch: the file was removed meanwhile; nothing was changed")
		}
		return fsError("patch", f.path, err)
	}
	moved, err := fileio.Lstatat(f.td.fd, f.tmp)
	now, ferr := fstat(f.cur.f)
	if err != nil || ferr != nil || !sameInode(moved, f.cur.st) || now.Mtim != f.cur.st.Mtim || now.Size != f.cur.st.Size {
		if xerr := unix.Renameat2(f.td.fd, f.tmp, f.d.fd, f.base, unix.RENAME_NOREPLACE); xerr != nil {
			bug(xerr)
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_INTERNAL, f.path, "patch: the file changed during the commit and could not be put back")
		}
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, f.path, "patch: the file changed during the commit; nothing was changed")
	}
	return nil
}
