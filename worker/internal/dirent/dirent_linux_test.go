package dirent

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Dtype agrees with the kernel's directory entry types for every type a
// stat mode names.
func TestDtypeEveryMode(t *testing.T) {
	for mode, dt := range map[uint32]byte{unix.S_IFREG: unix.DT_REG, unix.S_IFDIR: unix.DT_DIR, unix.S_IFLNK: unix.DT_LNK,
		unix.S_IFIFO: unix.DT_FIFO, unix.S_IFSOCK: unix.DT_SOCK, unix.S_IFCHR: unix.DT_CHR, unix.S_IFBLK: unix.DT_BLK} {
		if got := Dtype(mode | 0o644); got != dt {
			t.Errorf("Dtype(%#o) = %d, want %d", mode, got, dt)
		}
	}
}
