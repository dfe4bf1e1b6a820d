// Package hashcache remembers the sha256 of recently hashed file versions,
// keyed by what stat proves of a version (device, inode, size, mtime,
// ctime), and the SHA-256 state after a large file's last byte, so that an
// append hashes only what it adds. It trusts stat only as far as the
// kernel's timestamps go: an entry is made only under a key that any later
// write must change.
package hashcache
