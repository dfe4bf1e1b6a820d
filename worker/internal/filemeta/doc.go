// Package filemeta carries a file's metadata over to the file that
// replaces it: owner, group, extended attributes (POSIX ACLs and security
// labels among them), mode bits and the inode flags a user sets, all
// through descriptors, each read back and compared. What cannot be carried
// over exactly is an error naming it; nothing is dropped silently but what
// the kernel's own write path drops for new content.
package filemeta
