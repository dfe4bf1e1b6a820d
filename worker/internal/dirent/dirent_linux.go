package dirent

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"unsafe"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"golang.org/x/sys/unix"
)

// ErrMalformed is a getdents record that does not fit the bytes read.
var ErrMalformed = errors.New("getdents: malformed record")

// Read calls each with every entry in the directory fd but "." and "..",
// read with getdents into buf: its name, valid only during the call, and
// its type (a DT_ value, DT_UNKNOWN where the file system does not say).
// The context is checked before each getdents and every 256 names.
func Read(ctx context.Context, fd int, buf []byte, each func(name []byte, typ byte) error) error {
	seen := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		// linux_dirent64: ino (8), off (8), reclen (2), type (1), then
		// the name, NUL-terminated, padded to reclen.
		const nameOff = 19
		for off := 0; off < n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen <= nameOff || off+reclen > n {
				return ErrMalformed
			}
			typ, name := buf[off+18], buf[off+nameOff:off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if len(name) == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			if seen++; seen%256 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if err := each(name, typ); err != nil {
				return err
			}
		}
	}
}

// Dtype is the directory entry type of a stat mode: on Linux a DT_ value
// is the mode's S_IFMT bits shifted down by 12 (glibc's IFTODT).
func Dtype(mode uint32) byte { return byte(mode & unix.S_IFMT >> 12) }

// FileType is the file type of a directory entry type.
func FileType(t byte) fsmcpv1.FileType {
	switch t {
	case unix.DT_REG:
		return fsmcpv1.FileType_FILE_TYPE_FILE
	case unix.DT_DIR:
		return fsmcpv1.FileType_FILE_TYPE_DIRECTORY
	case unix.DT_LNK:
		return fsmcpv1.FileType_FILE_TYPE_SYMLINK
	case unix.DT_FIFO:
		return fsmcpv1.FileType_FILE_TYPE_FIFO
	case unix.DT_SOCK:
		return fsmcpv1.FileType_FILE_TYPE_SOCKET
	case unix.DT_CHR, unix.DT_BLK:
		return fsmcpv1.FileType_FILE_TYPE_DEVICE
	}
	return fsmcpv1.FileType_FILE_TYPE_UNSPECIFIED
}

// Lstat lstats name in the directory fd with fstatat: no path string
// outside the Root is ever walked. gone reports a name removed since the
// directory was read.
func Lstat(fd int, name []byte, st *unix.Stat_t) (gone bool, err error) {
	err = unix.Fstatat(fd, String(name), st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return true, nil
	}
	return false, err
}

// String is b as a string without a copy, for a call that neither
// keeps the string nor outlives b's contents.
func String(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
