package worker

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/dirwalk"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"golang.org/x/sys/unix"
)

// Name resolution: the one place where the worker turns a client's path
// into something it acts on. Every RPC reaches files only through the
// functions below, each named for what the call needs:
//
//	openContent(op, raw)        a regular file whose bytes are read or hashed
//	openMutation(op, raw, kind) the parent directory of a name to create,
//	                            replace or remove, and that name
//	openListing(op, raw)        a directory whose names are listed
//	openSearch(op, raw)         the directory or file a search runs on
//	statName(op, raw)           lstat of one name, never followed
//
// Each cleans the client's bytes (clientPath), opens what they name
// through the os.Root, derives from the kernel the root-relative path that
// the opened object really has (realPath), and judges that path with the
// access kind against the operator's policy (judge). The path judged is
// never the client's spelling: "a/../.git/config", "//.git/config", a
// symlinked or renamed parent and a path_base64 twin all resolve to the
// same descriptor, and so to the same real path.
//
// What it does not prevent: a second name the kernel cannot tell from the
// first (a hard link, a bind mount of a protected directory elsewhere in
// the root) is judged by the name the call used; and an outside process
// that renames a directory between the judgement and the system call
// that uses its descriptor. Within the worker, a mutation holds
// s.renames shared from its judgement to its last system call and a
// directory move holds it exclusively, so no RPC can rename a directory
// under another's judgement.

// access is what a call does with the name it resolves.
type access uint8

const (
	// accessMeta reads names and lstat information only: never refused
	// by the policy.
	accessMeta access = iota
	// accessContent reads a file's bytes or their hash: refused for a
	// denied path.
	accessContent
	// accessMutate creates, replaces or removes a name: refused for a
	// protected path and for a temp name anywhere in the path.
	accessMutate
	// accessRewrite replaces a file's content after reading or hashing
	// the current one: refused when accessMutate or accessContent is.
	accessRewrite
)

// rootPath is the kernel's name for the root directory, against which the
// names of opened descriptors are made root-relative.
type rootPath struct {
	fd   int // O_PATH descriptor of the root, held for the Service's life
	name atomic.Pointer[string]
}

func newRootPath(root *os.Root) (*rootPath, error) {
	f, err := root.OpenFile(".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	// The descriptor is kept for the Service's lifetime; os.File would
	// close it when collected.
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	r := &rootPath{fd: fd}
	if _, err := r.refresh(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

// refresh reads the root's name again: the host may have renamed it.
func (r *rootPath) refresh() (string, error) {
	name, err := fdName(r.fd)
	if err != nil {
		return "", err
	}
	r.name.Store(&name)
	return name, nil
}

// deletedSuffix is what the kernel appends to the name of a descriptor
// whose file was unlinked.
const deletedSuffix = " (deleted)"

// fdName is the kernel's absolute name of an open descriptor, read from
// /proc/self/fd. The kernel builds it from the descriptor's own dentry and
// mount, so it is the object's name now, whatever path opened it. It
// works under the worker's confinement: Landlock does not govern readlink
// and the seccomp filter allows readlinkat; /proc/self is the worker's own
// even when it is not dumpable.
func fdName(fd int) (string, error) {
	var buf [unix.PathMax + 1]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil {
		return "", err
	}
	if n > unix.PathMax {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}

// realPath is the root-relative path of the open descriptor fd, "" for
// the root itself. A descriptor that is no longer under the root (moved
// out by another process) is outside_root; one whose file was removed is
// not_found.
func (s *Service) realPath(op, p string, fd int) (string, error) {
	name, err := fdName(fd)
	if errors.Is(err, unix.ENAMETOOLONG) {
		return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p,
			"%s: the path is too long for the kernel to name (over %d bytes with the root's)", op, unix.PathMax)
	}
	if err != nil {
		return "", fsError(op, p, err)
	}
	if strings.HasSuffix(name, deletedSuffix) {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && st.Nlink == 0 {
			return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, p, "%s: removed while it was opened", op)
		}
	}
	if rel, ok := under(name, *s.rootPath.name.Load()); ok {
		return rel, nil
	}
	// The root itself may have been renamed on the host since.
	rootName, err := s.rootPath.refresh()
	if err != nil {
		return "", fsError(op, p, err)
	}
	if rel, ok := under(name, rootName); ok {
		return rel, nil
	}
	return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_OUTSIDE_ROOT, p, "%s: the path leads outside the root", op)
}

// under makes name relative to root, if it lies there.
func under(name, root string) (string, bool) {
	switch {
	case name == root:
		return "", true
	case root == "/":
		return name[1:], strings.HasPrefix(name, "/")
	case len(name) > len(root) && name[len(root)] == '/' && name[:len(root)] == root:
		return name[len(root)+1:], true
	}
	return "", false
}

// joinRel joins a root-relative directory and a name.
func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// judge refuses what the access kind may not do to the real
// root-relative path rel (p is the client's path, for the error).
// Content is judged by the call's policy (policyOf): --deny and the
// --rules lines of the call's tool.
func (s *Service) judge(ctx context.Context, op, p, rel string, kind access) error {
	if kind == accessMutate || kind == accessRewrite {
		if hasTempComponent([]byte(rel)) {
			return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p,
				"%s: names starting with %s are reserved for fsmcp's temp files", op, tempPrefix)
		}
		s.refreshDerived(rel)
		if why, ok := s.protectedBy(rel); ok {
			return policyError(op, p, rel, "is protected", why)
		}
	}
	if kind == accessContent || kind == accessRewrite {
		if why, ok := s.deniedBy(ctx, rel); ok {
			return policyError(op, p, rel, "is denied", why)
		}
	}
	return nil
}

// openContent opens the regular file p for its content, following
// symlinks that stay inside the root. It checks the type before opening,
// so that a fifo or device is never opened, and again on the open
// descriptor; the open is non-blocking, so a fifo swapped in between
// cannot block it. It returns the file, its fstat and its real
// root-relative path; a denied path is refused.
func (s *Service) openContent(ctx context.Context, op string, raw []byte) (*os.File, *unix.Stat_t, string, error) {
	p, err := clientPath(raw)
	if err != nil {
		return nil, nil, "", err
	}
	return s.openContentPath(ctx, op, p)
}

// openContentPath is openContent for a path clientPath already cleaned.
func (s *Service) openContentPath(ctx context.Context, op, p string) (*os.File, *unix.Stat_t, string, error) {
	f, st, rel, err := s.openFile(op, p)
	if err != nil {
		return nil, nil, "", err
	}
	s.note(rel, st)
	err = s.judge(ctx, op, p, rel, accessContent)
	if err == nil {
		err = s.judgeLink(ctx, op, p, rel, st, accessContent)
	}
	if err == nil {
		err = s.judgeRules(ctx, op, p, rel)
	}
	if err != nil {
		f.Close()
		return nil, nil, "", err
	}
	return f, st, rel, nil
}

// openFile opens the regular file p as openContentPath does, without
// judging it.
func (s *Service) openFile(op, p string) (*os.File, *unix.Stat_t, string, error) {
	fi, err := s.root.Stat(p)
	if err != nil {
		return nil, nil, "", fsError(op, p, err)
	}
	if err := regularOnly(op, p, toStat(fi)); err != nil {
		return nil, nil, "", err
	}
	f, err := s.root.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, "", fsError(op, p, err)
	}
	st, err := fstat(f)
	if err == nil {
		err = regularOnly(op, p, st)
	}
	if err != nil {
		f.Close()
		return nil, nil, "", fsError(op, p, err)
	}
	rel, err := s.realPath(op, p, int(f.Fd()))
	if err != nil {
		f.Close()
		return nil, nil, "", err
	}
	return f, st, rel, nil
}

// openMutation opens, through the Root, the directory that holds the
// final component of the client path raw, for a mutation of that one
// name, and judges the name's real path with kind (accessMutate or
// accessRewrite). The final component must be a plain name (not the
// root, "." or "..", no trailing slash, not a temp name) and is never
// followed: the caller acts on it with *at system calls relative to the
// returned descriptor. It holds s.renames shared until the caller calls
// the returned unlock, after its last system call on the name.
func (s *Service) openMutation(ctx context.Context, op string, raw []byte, kind access) (*parent, string, func(), error) {
	p, err := clientPath(raw)
	if err != nil {
		return nil, "", nil, err
	}
	return s.openMutationPath(ctx, op, p, kind)
}

// openMutationPath is openMutation for a path clientPath already cleaned.
func (s *Service) openMutationPath(ctx context.Context, op, p string, kind access) (*parent, string, func(), error) {
	unlock := s.lockRenames(false)
	d, base, err := s.openName(ctx, op, p, kind)
	if err != nil {
		unlock()
		return nil, "", nil, err
	}
	return d, base, unlock, nil
}

// openName is openMutationPath for a caller that holds s.renames itself.
func (s *Service) openName(ctx context.Context, op, p string, kind access) (*parent, string, error) {
	dir, base, err := splitName(op, p)
	if err != nil {
		return nil, "", err
	}
	d, err := s.openDir(op, p, dir)
	if err != nil {
		return nil, "", err
	}
	rel := joinRel(d.rel, base)
	st, serr := fileio.Lstatat(d.fd, base)
	if serr == nil {
		s.note(rel, st)
	}
	err = s.judge(ctx, op, p, rel, kind)
	if err == nil && serr == nil {
		err = s.judgeLink(ctx, op, p, rel, st, kind)
	}
	if err == nil {
		err = s.judgeRules(ctx, op, p, rel)
	}
	if err != nil {
		d.close()
		return nil, "", err
	}
	return d, base, nil
}

// lockRenames takes s.renames shared, or exclusively, and returns the
// unlock.
func (s *Service) lockRenames(exclusive bool) func() {
	if exclusive {
		s.renames.Lock()
		return s.renames.Unlock
	}
	s.renames.RLock()
	return s.renames.RUnlock
}

// judgeCarry judges one name that a recursive delete removes from the
// real path from (to == ""), or that a move carries from from to to.
// Neither end may be protected (by the globs, or by derived protection,
// which the judgement of the call's own path brought up to date; as names
// compare there), and denied content (by the call's policy) may not move
// to a path that is not denied.
func (s *Service) judgeCarry(ctx context.Context, op, p, from, to string) error {
	if why, ok := s.protectedBy(from); ok {
		return policyError(op, p, from, "is protected", why)
	}
	if to == "" {
		return nil
	}
	if why, ok := s.protectedBy(to); ok {
		return policyError(op, p, to, "would be protected", why)
	}
	if why, ok := s.deniedBy(ctx, from); ok {
		if _, still := s.deniedBy(ctx, to); !still {
			return policyError(op, p, from, "is denied (and would not be where it moves)", why)
		}
	}
	return nil
}

// judgeTree judges, before anything changes, every name beneath the
// directory base of d (never followed) with judgeCarry: what a recursive
// delete would remove (to == ""), or what a move would carry beneath the
// real path to.
func (s *Service) judgeTree(ctx context.Context, op, p string, d *parent, base, to string) error {
	// A delete (to == "") walks even with no policy: the walk is also what
	// finds a tree too deep to remove, before anything is removed.
	if es := s.derived.entries.Load(); to != "" && s.policyOf(ctx).Empty() && (es == nil || len(*es) == 0) {
		return nil
	}
	fd, err := dirwalk.Open(d.fd, base)
	if err != nil {
		return fsError(op, p, err)
	}
	defer unix.Close(fd)
	from := joinRel(d.rel, base)
	w := &dirwalk.Walker{Batch: 512,
		Visit: func(_ int, _ fs.DirEntry, rel string) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, fsError(op, p, err)
			}
			carried := ""
			if to != "" {
				carried = to + rel[len(from):]
			}
			return true, s.judgeCarry(ctx, op, p, rel, carried)
		},
		Fail: func(_ string, err error) error {
			if errors.Is(err, dirwalk.ErrTooDeep) {
				return newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p, "%s: the tree is deeper than %d levels; nothing was changed", op, maxWalkDepth)
			}
			// What could not be read could not be judged.
			return fsError(op, p, err)
		}}
	return w.Walk(fd, from)
}

// openDir opens the directory dir (the directory part of the client path
// p) through the Root, with its fstat and real path.
func (s *Service) openDir(op, p, dir string) (*parent, error) {
	f, err := s.root.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fsError(op, p, err)
	}
	d := &parent{f: f, fd: int(f.Fd()), dir: dir}
	if err := unix.Fstat(d.fd, &d.st); err != nil {
		f.Close()
		return nil, fsError(op, p, err)
	}
	if d.rel, err = s.realPath(op, p, d.fd); err != nil {
		f.Close()
		return nil, err
	}
	return d, nil
}

// openListing opens the directory raw names, following symlinks that
// stay inside the root, for listing its names (accessMeta). It returns the
// directory, its fstat, its real root-relative path and the cleaned
// client path.
//
// Under --rules it judges the directory on the call's rule context (ctx).
func (s *Service) openListing(ctx context.Context, op string, raw []byte) (*os.File, *unix.Stat_t, string, string, error) {
	cr := callRulesOf(ctx)
	p, err := clientPath(raw)
	if err != nil {
		return nil, nil, "", "", err
	}
	f, err := s.root.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, "", p, fsError(op, p, err)
	}
	st, err := fstat(f)
	if err != nil {
		f.Close()
		return nil, nil, "", p, fsError("fstat", p, err)
	}
	if fileType(st.Mode) != fsmcpv1.FileType_FILE_TYPE_DIRECTORY {
		f.Close()
		return nil, nil, "", p, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_A_DIRECTORY, p, "%s: not a directory", op)
	}
	rel, err := s.realPath(op, p, int(f.Fd()))
	if err == nil {
		err = s.judgeCallRules(cr, op, p, rel)
	}
	if err != nil {
		f.Close()
		return nil, nil, "", p, err
	}
	return f, st, rel, p, nil
}

// named is one name resolved for lstat: its real root-relative path and
// its lstat, the final component never followed.
type named struct {
	p   string // the cleaned client path
	rel string
	st  *unix.Stat_t
}

// statName resolves raw for lstat (accessMeta). A final component "." or
// ".." (or the root) is a directory, opened as such; a name in the root
// is lstat'ed through the Root; any other is lstat'ed in its parent's
// descriptor.
func (s *Service) statName(ctx context.Context, op string, raw []byte) (*named, error) {
	p, err := clientPath(raw)
	if err != nil {
		return nil, err
	}
	dir, base := path.Split(p)
	if base == "." || base == ".." || base == "" {
		f, err := s.root.OpenFile(p, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, fsError(op, p, err)
		}
		defer f.Close()
		st, err := fstat(f)
		if err != nil {
			return nil, fsError(op, p, err)
		}
		rel, err := s.realPath(op, p, int(f.Fd()))
		if err == nil {
			err = s.judgeRules(ctx, op, p, rel)
		}
		if err != nil {
			return nil, err
		}
		return &named{p: p, rel: rel, st: st}, nil
	}
	if dir == "" {
		// A name in the root itself: the root's real path is "" by
		// definition, so there is no directory to open and name.
		fi, err := s.root.Lstat(base)
		if err != nil {
			return nil, fsError(op, p, err)
		}
		return s.statNamed(ctx, op, p, base, toStat(fi))
	}
	f, err := s.root.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fsError(op, p, err)
	}
	defer f.Close()
	st, err := fileio.Lstatat(int(f.Fd()), base)
	if err != nil {
		return nil, fsError(op, p, err)
	}
	rel, err := s.realPath(op, p, int(f.Fd()))
	if err != nil {
		return nil, err
	}
	return s.statNamed(ctx, op, p, joinRel(rel, base), st)
}

// statNamed judges the name statName resolved to rel, whose lstat is st.
func (s *Service) statNamed(ctx context.Context, op, p, rel string, st *unix.Stat_t) (*named, error) {
	s.note(rel, st)
	if err := s.judgeRules(ctx, op, p, rel); err != nil {
		return nil, err
	}
	return &named{p: p, rel: rel, st: st}, nil
}

// openSearch resolves the path argument of a search through the Root,
// for kind: accessMeta lists names (fs_glob), accessContent reads content
// (fs_grep). A path that leaves the root is outside_root here, before rg
// starts; a fifo, socket or device is not_regular, so rg never opens (and
// blocks on) one; a temp name is not_found. For content, a denied file or
// directory is refused, and the target filters denied paths from what rg
// finds beneath a directory.
//
// Under --rules it judges them on the call's rule context (ctx).
func (s *Service) openSearch(ctx context.Context, op string, raw []byte, kind access) (*searchTarget, error) {
	cr := callRulesOf(ctx)
	p, err := clientPath(raw)
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Stat(p)
	if err != nil {
		return nil, fsError(op, p, err)
	}
	t := &searchTarget{prefix: displayPrefix(p)}
	switch fileType(toStat(fi).Mode) {
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		// O_DIRECTORY: should p have been swapped for a fifo since the
		// stat, the open fails instead of blocking.
		d, err := s.root.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
		if err != nil {
			return nil, fsError(op, p, err)
		}
		t.dir = d
		if t.rel, err = s.realPath(op, p, int(d.Fd())); err != nil {
			d.Close()
			return nil, err
		}
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		// Judged below, with kind.
		f, _, rel, err := s.openFile(op, p)
		if err != nil {
			return nil, err
		}
		d, err := s.root.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			f.Close()
			return nil, fsError(op, ".", err)
		}
		t.dir, t.file, t.rel = d, f, rel
	default:
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_REGULAR, p, "%s: not a regular file or directory", op)
	}
	if hasTempComponent([]byte(t.rel)) {
		t.close()
		return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND, p, "%s: no such file or directory", op)
	}
	if err := s.judgeCallRules(cr, op, p, t.rel); err != nil {
		t.close()
		return nil, err
	}
	if kind == accessContent {
		if err := s.judge(ctx, op, p, t.rel, accessContent); err != nil {
			t.close()
			return nil, err
		}
		if pol := s.policyOf(ctx); pol.Denies() {
			t.deny = pol
			t.linkDenied = func(rgPath []byte) bool { return s.linkDenied(pol, int(t.dir.Fd()), string(rgPath)) }
		}
	}
	return t, nil
}

// policyError is a refusal by the policy: permission_denied, naming the
// rule (why: "--protect GLOB", or what sandbox.Matcher.Denied answered),
// marked as a policy violation.
func policyError(op, p, rel, what, why string) *Error {
	e := newError(fsmcpv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED, p,
		"%s: %q %s by the policy (%s)", op, rel, what, why)
	e.PolicyViolation = true
	return e
}
