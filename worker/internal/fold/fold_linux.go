package fold

import "golang.org/x/sys/unix"

// fsCasefoldFL is FS_CASEFOLD_FL, the per-directory casefold flag of
// ext4 and f2fs (and tmpfs since Linux 6.13), read by FS_IOC_GETFLAGS.
const fsCasefoldFL = 0x40000000

// ntfs3SuperMagic is the statfs type of the ntfs3 driver, which x/sys
// does not name.
const ntfs3SuperMagic = 0x7366746e

// foldingFS are the statfs types of filesystems that compare names
// without case on every directory.
var foldingFS = map[int64]bool{
	unix.MSDOS_SUPER_MAGIC: true, unix.EXFAT_SUPER_MAGIC: true, ntfs3SuperMagic: true,
	unix.CIFS_SUPER_MAGIC: true, unix.SMB2_SUPER_MAGIC: true, unix.SMB_SUPER_MAGIC: true,
}

// Dir reports whether the open directory fd compares names without
// case.
func Dir(fd int) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) == nil && foldingFS[int64(fs.Type)] {
		return true
	}
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	return err == nil && flags&fsCasefoldFL != 0
}
