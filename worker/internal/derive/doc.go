// Package derive finds what a git repository's configuration makes
// protected (derived protection). Beside the operator's globs, the policy protects
// what the configuration of each git repository in the root makes git run
// or read as configuration: the hooks directory that core.hooksPath names,
// the files include.path and includeIf.*.path pull in, and the git
// directory a ".git" file or symlink points at. The configuration is read
// by gitconfig, in Go, through the Root: nothing runs.
//
// Repositories are the ".git" entries (directories, files, symlinks) in
// the root. They are found by one walk of the tree, when the start-up
// sweep begins or at the first mutation if that comes first (reads never
// wait for it), and at every mutation git's own discovery is
// repeated for the mutated path: each of its ancestors is asked for a
// ".git" the walk did not know (one the host made since). Each repository
// keeps the stamps (identity, size, mtime, ctime) of the files its entries
// came from; every mutation compares them first and derives a repository
// again when one changed, so an edit of .git/config by the host counts
// from the next call on.
//
// What it cannot see: configuration outside the root (the user's and the
// system's, which may set core.hooksPath or include files in the root),
// a repository enclosing the root, and bare repositories (no ".git"
// entry). includeIf conditions are not evaluated: every conditional file
// counts, which can only protect more.
package derive
