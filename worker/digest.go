package worker

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path"
	"slices"
	"sync/atomic"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/fsmcp/fsmcp/worker/internal/checkpoint"
	"github.com/fsmcp/fsmcp/worker/internal/dirwalk"
	"github.com/fsmcp/fsmcp/worker/internal/fileio"
	"github.com/fsmcp/fsmcp/worker/internal/hashcache"
	"github.com/fsmcp/fsmcp/worker/internal/treesum"
	"golang.org/x/sys/unix"
)

// The tree digest is package treesum's Merkle hash.

// digestProgressEvery is how often a digest reports progress.
const digestProgressEvery = 250 * time.Millisecond

// digester computes tree digests through the hash cache.
type digester struct {
	s     *Service
	ctx   context.Context
	files atomic.Int64
	dirs  atomic.Int64
	bytes atomic.Int64
	// visit, when set, is told of every regular file and directory
	// digested (a checkpoint records them); an error ends the walk.
	visit func(rel string, e checkpoint.Entry) error
	// skipDenied leaves files the policy denies out of the walk instead
	// of refusing it: a checkpoint records nothing of them.
	skipDenied bool
}

// errSkipped marks a file skipDenied left out.
var errSkipped = errors.New("left out")

// Digest implements fsmcpv1.WorkerServiceServer.
func (s *Service) Digest(req *fsmcpv1.DigestRequest, stream fsmcpv1.WorkerService_DigestServer) error {
	p, err := clientPath(req.GetPath())
	if err != nil {
		return err
	}
	ctx := stream.Context()
	dg := &digester{s: s, ctx: ctx}
	type result struct {
		sum [32]byte
		typ fsmcpv1.FileType
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, typ, err := dg.path(p)
		done <- result{sum, typ, err}
	}()
	tick := time.NewTicker(digestProgressEvery)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return fsError("digest", p, r.err)
			}
			return stream.Send(&fsmcpv1.DigestResponse{Done: true, TreeSha256: hex.EncodeToString(r.sum[:]), Type: r.typ,
				Files: dg.files.Load(), Directories: dg.dirs.Load(), Bytes: dg.bytes.Load()})
		case <-tick.C:
			if err := stream.Send(&fsmcpv1.DigestResponse{Progress: &fsmcpv1.Progress{FilesSearched: dg.files.Load()}}); err != nil {
				<-done // the walk sees the cancelled context and stops
				return err
			}
		}
	}
}

// path digests the node at the client path p, resolved as an lstat
// (accessMeta): the final component is never followed, and each file's
// content is judged on its own (see file).
func (dg *digester) path(p string) ([32]byte, fsmcpv1.FileType, error) {
	if p == "." {
		d, err := dg.s.openDir("digest", p, ".")
		if err != nil {
			return [32]byte{}, 0, err
		}
		defer d.close()
		if err := dg.s.judgeRules(dg.ctx, "digest", p, d.rel); err != nil {
			return [32]byte{}, 0, err
		}
		sum, err := dg.dir(d.fd, ".", d.rel, 0)
		return sum, fsmcpv1.FileType_FILE_TYPE_DIRECTORY, err
	}
	d, base, err := dg.s.openName(dg.ctx, "digest", p, accessMeta)
	if err != nil {
		return [32]byte{}, 0, err
	}
	defer d.close()
	return dg.node(d.fd, base, p, joinRel(d.rel, base), 0)
}

// node digests the entry name of the directory fd, whose client path is p
// and real root-relative path rel.
func (dg *digester) node(fd int, name, p, rel string, depth int) ([32]byte, fsmcpv1.FileType, error) {
	if err := dg.ctx.Err(); err != nil {
		return [32]byte{}, 0, err
	}
	st, err := fileio.Lstatat(fd, name)
	if err != nil {
		return [32]byte{}, 0, err
	}
	typ := fileType(st.Mode)
	switch typ {
	case fsmcpv1.FileType_FILE_TYPE_FILE:
		sum, err := dg.file(fd, name, p, rel, st)
		return sum, typ, err
	case fsmcpv1.FileType_FILE_TYPE_DIRECTORY:
		if depth >= maxWalkDepth {
			return [32]byte{}, 0, newError(fsmcpv1.ErrorCode_ERROR_CODE_TOO_LARGE, p, "digest: the tree is deeper than %d levels", maxWalkDepth)
		}
		sub, err := dirwalk.Open(fd, name)
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				return [32]byte{}, 0, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "digest: the tree changed while it was read")
			}
			return [32]byte{}, 0, err
		}
		defer unix.Close(sub)
		sum, err := dg.dir(sub, p, rel, depth+1)
		return sum, typ, err
	case fsmcpv1.FileType_FILE_TYPE_SYMLINK:
		target, inside, err := dg.s.linkTarget(p)
		if err != nil {
			return [32]byte{}, 0, err
		}
		payload := []byte{'e'}
		if inside {
			payload = append([]byte{'i'}, target...)
		}
		return treesum.Node(treesum.Symlink, 0, payload), typ, nil
	}
	return treesum.Node(treesum.Other, st.Mode&0o7777, nil), typ, nil
}

// file digests a regular file: from the hash cache when its lstat shows a
// version already hashed (no open at all), else opened without following
// anything and hashed through the cache. A denied file is refused: its
// hash is its content's.
func (dg *digester) file(fd int, name, p, rel string, st *unix.Stat_t) ([32]byte, error) {
	if err := dg.s.judge(dg.ctx, "digest", p, rel, accessContent); err != nil {
		if dg.skipDenied {
			return [32]byte{}, errSkipped
		}
		return [32]byte{}, err
	}
	dg.files.Add(1)
	dg.bytes.Add(st.Size)
	sum, ok := dg.s.hashes.Get(hashcache.KeyOf(st))
	if !ok {
		ffd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) {
				return [32]byte{}, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, p, "digest: the tree changed while it was read")
			}
			return [32]byte{}, err
		}
		f := os.NewFile(uintptr(ffd), name)
		defer f.Close()
		opened, err := fstat(f)
		if err != nil {
			return [32]byte{}, err
		}
		if err := regularOnly("digest", p, opened); err != nil {
			return [32]byte{}, err
		}
		if sum, err = dg.s.hashOpen(dg.ctx, f, opened); err != nil {
			return [32]byte{}, err
		}
		st = opened
	}
	raw, err := hex.DecodeString(sum)
	if err != nil {
		return [32]byte{}, err
	}
	if dg.visit != nil {
		if err := dg.visit(rel, checkpoint.Entry{Path: []byte(rel), Type: checkpoint.File, Mode: st.Mode & 0o7777, Size: st.Size, SHA: sum}); err != nil {
			return [32]byte{}, err
		}
	}
	return treesum.Node(treesum.File, st.Mode&0o7777, raw), nil
}

// dir digests the open directory fd, whose client path is p and real
// root-relative path rel.
func (dg *digester) dir(fd int, p, rel string, depth int) ([32]byte, error) {
	dg.dirs.Add(1)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return [32]byte{}, err
	}
	names, err := dirwalk.Names(fd)
	if err != nil {
		return [32]byte{}, err
	}
	// The listing and the payload built from it are held while the
	// directory's children are digested, deeper listings with them: they
	// take from the memory budget, so that concurrent digests of large
	// directories wait for it (then unavailable) instead of together
	// exceeding the worker's memory.
	release, err := dg.s.reserve(dg.ctx, "digest", p, treesum.ListingBytes(names))
	if err != nil {
		return [32]byte{}, err
	}
	defer release()
	slices.Sort(names) // Go compares strings as bytes
	var payload []byte
	for _, n := range names {
		if isTempName(n) {
			continue
		}
		child := n
		if p != "." {
			child = path.Join(p, n)
		}
		sum, _, err := dg.node(fd, n, child, joinRel(rel, n), depth)
		if errors.Is(err, errSkipped) {
			continue
		}
		if errors.Is(err, unix.ENOENT) {
			return [32]byte{}, newError(fsmcpv1.ErrorCode_ERROR_CODE_PRECONDITION_FAILED, child, "digest: the tree changed while it was read")
		}
		if err != nil {
			return [32]byte{}, err
		}
		payload = binary.BigEndian.AppendUint32(payload, uint32(len(n)))
		payload = append(payload, n...)
		payload = append(payload, sum[:]...)
	}
	if dg.visit != nil {
		if err := dg.visit(rel, checkpoint.Entry{Path: []byte(rel), Type: checkpoint.Dir, Mode: st.Mode & 0o7777}); err != nil {
			return [32]byte{}, err
		}
	}
	return treesum.Node(treesum.Dir, st.Mode&0o7777, payload), nil
}
