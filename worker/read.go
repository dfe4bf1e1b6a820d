package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/fsmcp/fsmcp/proto/callstream"
	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/worker/internal/dirent"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
	"github.com/fsmcp/fsmcp/worker/internal/lines"
	"golang.org/x/sys/unix"
)

// fileType is the file type of a stat mode; a type no directory entry
// names is FILE_TYPE_OTHER.
func fileType(mode uint32) fsmcpv1.FileType {
	if t := dirent.FileType(dirent.Dtype(mode)); t != fsmcpv1.FileType_FILE_TYPE_UNSPECIFIED {
		return t
	}
	return fsmcpv1.FileType_FILE_TYPE_OTHER
}

func entryFromStat(name string, st *unix.Stat_t) *fsmcpv1.Entry {
	return &fsmcpv1.Entry{
		Name:          []byte(name),
		Type:          fileType(st.Mode),
		Size:          st.Size,
		MtimeUnixNano: st.Mtim.Nano(),
		Mode:          st.Mode & 0o7777,
		Nlink:         uint64(st.Nlink),
	}
}

// lstat is os.Root.Lstat returning the raw stat structure.
func (s *Service) lstat(p string) (*unix.Stat_t, error) {
	fi, err := s.root.Lstat(p)
	if err != nil {
		return nil, err
	}
	return toStat(fi), nil
}

func toStat(fi os.FileInfo) *unix.Stat_t {
	sys := fi.Sys().(*syscall.Stat_t)
	return &unix.Stat_t{
		Dev: sys.Dev, Ino: sys.Ino, Mode: sys.Mode, Nlink: sys.Nlink, Size: sys.Size,
		Mtim: unix.Timespec(sys.Mtim), Ctim: unix.Timespec(sys.Ctim),
	}
}

func fstat(f *os.File) (*unix.Stat_t, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return toStat(fi), nil
}

func sameInode(a, b *unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }

// Stat implements fsmcpv1.WorkerServiceServer. A denied file is
// described without its sha256.
func (s *Service) Stat(ctx context.Context, req *fsmcpv1.StatRequest) (*fsmcpv1.StatResponse, error) {
	return s.stat(ctx, req)
}

// stat is Stat and StatStream: lstat of the path, and the sha256 of a
// regular file unless no_hash (which reads no content at all, so the type
// and size of a file too large to hash in time can always be had).
func (s *Service) stat(ctx context.Context, req *fsmcpv1.StatRequest) (*fsmcpv1.StatResponse, error) {
	n, err := s.statName(ctx, "lstat", req.GetPath())
	if err != nil {
		return nil, err
	}
	p, st := n.p, n.st
	resp := &fsmcpv1.StatResponse{Entry: entryFromStat(path.Base(p), st)}
	switch resp.Entry.Type {
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		if _, denied := s.deniedBy(ctx, n.rel); denied || req.GetNoHash() {
			break
		}
		// A version already hashed needs no open, as in fs_digest: its
		// key is this lstat's, and the content checks the open would make
		// are the ones statName made, plus hard links.
		if sum, ok := s.hashes.Get(hashcache.KeyOf(st)); ok && s.judgeLink(ctx, "hash", p, n.rel, st, accessContent) == nil {
			resp.Sha256 = sum
			break
		}
		sum, err := s.hash(ctx, p, st)
		if err != nil {
			return nil, err
		}
		resp.Sha256 = sum
	case fsmcpv1.FileType_FILE_TYPE_SYMLINK:
		target, inside, err := s.linkTarget(p)
		if err != nil {
			return nil, fsError("readlink", p, err)
		}
		if inside {
			resp.Target, resp.HasTarget = []byte(target), true
		} else {
			resp.TargetEscapes = true
		}
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		if sameInode(st, toStat(s.rootInfo)) {
			resp.Confinement = s.attestation()
		}
	}
	return resp, nil
}

// linkTarget reads the symlink p and reports whether its target stays
// inside the root. An absolute target never does, even one that names a
// place inside: os.Root refuses to follow it, and its text is a host path.
func (s *Service) linkTarget(p string) (string, bool, error) {
	target, err := s.root.Readlink(p)
	if err != nil {
		return "", false, err
	}
	if strings.HasPrefix(target, "/") {
		return "", false, nil
	}
	_, err = s.root.Stat(p)
	switch {
	case err == nil:
		return target, true, nil
	case link.IsEscape(err):
		return "", false, nil
	}
	// The target dangles (or loops) before os.Root could tell whether it
	// leaves: judge the text alone, for reporting only.
	joined := path.Join(path.Dir(p), target)
	if joined == ".." || strings.HasPrefix(joined, "../") {
		return "", false, nil
	}
	return target, true, nil
}

func regularOnly(op, p string, st *unix.Stat_t) error {
	switch fileType(st.Mode) {
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		return nil
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_IS_A_DIRECTORY, p, "%s: is a directory", op)
	}
	return newError(fsmcpv1.ErrorCode_ERROR_CODE_NOT_REGULAR, p, "%s: not a regular file", op)
}

// hash returns the sha256 of the regular file p (whose lstat is st),
// from the cache when the file is unchanged, else streamed. If the file at
// p is not the inode that was stat'ed (it was replaced meanwhile), the stat
// is retried, a few times at most.
func (s *Service) hash(ctx context.Context, p string, st *unix.Stat_t) (string, error) {
	for range 3 {
		f, opened, _, err := s.openContentPath(ctx, "hash", p)
		if err != nil {
			return "", err
		}
		if !sameInode(opened, st) {
			f.Close()
			if st, err = s.lstat(p); err != nil {
				return "", fsError("lstat", p, err)
			}
			if fileType(st.Mode) != fsmcpv1.FileType_FILE_TYPE_FILE {
				return "", regularOnly("hash", p, st)
			}
			continue
		}
		sum, err := s.hashOpen(ctx, f, opened)
		f.Close()
		if err != nil {
			return "", fsError("read", p, err)
		}
		return sum, nil
	}
	return "", newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "hash: file kept changing while it was hashed")
}

// hashOpen hashes the open regular file f, whose fstat is st, through the
// cache. The file is re-stat'ed after hashing, so a write during the hash
// is never cached.
func (s *Service) hashOpen(ctx context.Context, f *os.File, st *unix.Stat_t) (string, error) {
	if sum, ok := s.hashes.Get(hashcache.KeyOf(st)); ok {
		return sum, nil
	}
	// Reading a whole file is heavy work.
	done, err := s.heavy(ctx, "hash", "")
	if err != nil {
		return "", err
	}
	defer done()
	fs, err := s.hashVersion(ctx, f, st)
	return fs.Hex, err
}

// hashVersion hashes the open regular file f, whose fstat st was taken
// before, from its current offset (its start, for a file just opened),
// and caches the sum by put's rule.
func (s *Service) hashVersion(ctx context.Context, f *os.File, st *unix.Stat_t) (hashcache.Sum, error) {
	start := time.Now()
	fs, err := hashFile(ctx, f)
	if err != nil {
		return hashcache.Sum{}, err
	}
	s.hashes.Hashed.Add(st.Size)
	if after, err := fstat(f); err == nil {
		s.hashes.Put(st, after, start, fs)
	}
	return fs, nil
}

// hashFile streams f through sha256 (hashcache.Stream), reporting its
// progress to the hashProgress ctx carries, if any.
func hashFile(ctx context.Context, f *os.File) (hashcache.Sum, error) {
	report, _ := ctx.Value(hashProgressKey{}).(func(hashed, total int64))
	return hashcache.Stream(ctx, f, report)
}

// entryAllowance is a generous estimate of the JSON an entry costs beyond
// its name; the front-end cuts the page exactly.
const entryAllowance = 128

// inlineHashBytes is the largest file whose sha256 a read computes when it
// is not cached: about 10 ms of hashing. A larger file's reply omits the
// sum (sha256_omitted) unless the read carries if_sha256, which needs it.
const inlineHashBytes = 16 << 20

// Read implements fsmcpv1.WorkerServiceServer. It returns at most
// MaxRead bytes, from offset or from the start of a line, and the sha256 of
// the version it read them from. A short result with offset+len < size
// means the caller should continue.
func (s *Service) Read(ctx context.Context, req *fsmcpv1.ReadRequest) (*fsmcpv1.ReadResponse, error) {
	p, err := clientPath(req.GetPath())
	if err != nil {
		return nil, err
	}
	if err := checkRead(p, req); err != nil {
		return nil, err
	}
	f, st, err := s.openRead(ctx, p)
	if err != nil {
		return nil, err
	}
	defer func() { f.Close() }()
	for range 3 {
		resp, err := s.readVersion(ctx, p, f, st, req)
		if err != nil {
			return nil, err
		}
		// The bytes, the sum and the line numbers all belong to one
		// version if the file is unchanged now, and the path still
		// names it: else read again, from the file the path names now.
		after, err := fstat(f)
		if err != nil {
			return nil, fsError("fstat", p, err)
		}
		if hashcache.KeyOf(after) == hashcache.KeyOf(st) {
			if fi, err := s.root.Stat(p); err == nil && sameInode(toStat(fi), st) {
				return resp, nil
			}
			f.Close()
			if f, st, err = s.openRead(ctx, p); err != nil {
				return nil, err
			}
			continue
		}
		st = after
	}
	return nil, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "read: the file kept changing while it was read")
}

// openRead opens p for a read. A file replaced by a rename between its
// open and its naming is opened again, up to openReadTries times: the path
// names a file still, only a newer one. (A writer renaming over the path
// in a tight loop wins the window between open and readlink often when the
// worker is descheduled in it; each try costs a few microseconds.)
func (s *Service) openRead(ctx context.Context, p string) (*os.File, *unix.Stat_t, error) {
	var err error
	for range openReadTries {
		var f *os.File
		var st *unix.Stat_t
		if f, st, _, err = s.openContentPath(ctx, "read", p); err == nil {
			return f, st, nil
		}
		if !errors.Is(err, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_NOT_FOUND}) {
			return nil, nil, err
		}
		if _, serr := s.root.Stat(p); serr != nil {
			return nil, nil, err
		}
	}
	return nil, nil, err
}

// openReadTries bounds openRead's tries.
const openReadTries = 64

func checkRead(p string, req *fsmcpv1.ReadRequest) error {
	invalid := func(msg string) error {
		return newError(fsmcpv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, p, "read: %s", msg)
	}
	switch {
	case req.GetOffset() < 0 || req.GetLength() < 0:
		return invalid("negative offset or length")
	case req.GetByLine() && req.GetLine() == 0:
		return invalid("line is 1-based (negative counts from the end)")
	case req.GetByLine() && req.GetOffset() != 0:
		return invalid("give line or offset, not both")
	case req.GetLines() < 0:
		return invalid("lines must not be negative")
	}
	return nil
}

// readVersion reads from f, whose fstat is st, what req asks.
func (s *Service) readVersion(ctx context.Context, p string, f *os.File, st *unix.Stat_t, req *fsmcpv1.ReadRequest) (*fsmcpv1.ReadResponse, error) {
	if st.Size > callstream.MaxBytes {
		// Not a small call, whatever it asked for (procs.go).
		defer s.procs.hold()()
	}
	resp := &fsmcpv1.ReadResponse{Size: st.Size, Offset: req.GetOffset()}
	sum, ok := s.hashes.Get(hashcache.KeyOf(st))
	if !ok && (st.Size <= inlineHashBytes || req.GetIfSha256() != "") {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fsError("read", p, err)
		}
		var err error
		if sum, err = s.hashOpen(ctx, f, st); err != nil {
			return nil, fsError("read", p, err)
		}
	}
	resp.Sha256, resp.Sha256Omitted = sum, sum == ""
	if want := req.GetIfSha256(); want != "" && want != sum {
		return nil, &Error{Code: fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, Path: p, CurrentSHA256: sum,
			Message: "read: the file has changed (its sha256 is not if_sha256)"}
	}
	limit := min(req.GetLength(), s.maxRead)
	if req.GetByLine() {
		if err := s.locateLine(ctx, f, st, req.GetLine(), resp); err != nil {
			return nil, fsError("read", p, err)
		}
	}
	n := min(limit, max(st.Size-resp.Offset, 0))
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, resp.Offset)
	if err != nil && err != io.EOF {
		return nil, fsError("read", p, err)
	}
	resp.Data = buf[:got]
	if req.GetByLine() {
		if err := lineEnds(ctx, f, st, req.GetLines(), resp); err != nil {
			return nil, fsError("read", p, err)
		}
	}
	return resp, nil
}

// locateLine sets resp.Offset and resp.FirstLine to where line (1-based,
// or negative from the end) starts (lines.Index.Locate).
func (s *Service) locateLine(ctx context.Context, f *os.File, st *unix.Stat_t, line int64, resp *fsmcpv1.ReadResponse) error {
	var err error
	resp.Offset, resp.FirstLine, err = s.lines.Locate(ctx, f, st, line)
	return err
}

// lineEnds cuts resp.Data after want whole lines (0: no limit) and
// records where each line in it ends; when no line ends in it, the
// length of the one it starts.
func lineEnds(ctx context.Context, f *os.File, st *unix.Stat_t, want int64, resp *fsmcpv1.ReadResponse) error {
	data := resp.Data
	for at := 0; want == 0 || int64(len(resp.LineEnds)) < want; {
		j := bytes.IndexByte(data[at:], '\n')
		if j < 0 {
			if at < len(data) && resp.Offset+int64(len(data)) == st.Size {
				resp.LineEnds = append(resp.LineEnds, int64(len(data)))
			}
			break
		}
		at += j + 1
		resp.LineEnds = append(resp.LineEnds, int64(at))
	}
	if k := len(resp.LineEnds); k > 0 {
		resp.Data = data[:resp.LineEnds[k-1]]
		return nil
	}
	if len(data) > 0 {
		n, err := lines.Length(ctx, f, resp.Offset, st.Size)
		resp.LineLength = n
		return err
	}
	return nil
}
