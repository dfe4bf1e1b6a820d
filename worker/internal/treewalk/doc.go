// Package treewalk reads what rg does not list of a tree for fs_tree: its
// directories, symlinks, fifos, sockets and devices, through descriptors,
// each directory opened in its parent with O_NOFOLLOW. It learns the
// directories from the names rg reports and reads each while rg runs;
// once rg has ended, a directory rg named nothing in is walked whole, and
// every entry is judged by rg's --debug log (package rglog), so that the
// listing leaves out exactly what fs_glob would. It does not list what lies
// beneath a symlinked directory, and it trusts no name it reads: each is
// one component, opened relative to its parent.
package treewalk
