// Package treesum is the tree digest (fs_digest's tree_sha256), a Merkle
// hash: each node's digest is sha256 over its type, its mode and its
// payload, and a directory's payload lists its children's names and
// digests. Changing any
// name's bytes, type, mode, file content or inside symlink target changes
// the root's digest; the order of readdir, timestamps, owners, inode
// numbers and link counts do not. Ignore files do not apply: every entry
// counts, hidden ones too, except the worker's own temp names, which no
// tool shows.
//
//	node      = sha256(type || mode || payload)     type: one byte, mode: uint32 big-endian, st_mode & 07777
//	file      payload = sha256(content)              (32 bytes)
//	directory payload = for each child, by name bytes: uint32 len(name) || name || node(child)
//	symlink   payload = 'i' || target, when the target stays inside the root; 'e' alone when it leaves
//	          or is absolute (its text is never hashed, as it is never shown); mode is 0
//	other     payload = empty (fifos, sockets, devices are never opened)
package treesum
