// Package dirwalk is the worker's one way down a directory tree: each
// directory opened in its parent's descriptor with O_NOFOLLOW|O_DIRECTORY,
// its entries read through a duplicate descriptor, at most MaxDepth levels
// (each level holds one descriptor). No symlink is ever followed and no
// path string is walked, so a symlink swapped in for a directory during a
// walk is met as a name, never entered. Copy, delete, digest, the temp
// sweep, the tree judgement and the search for repositories all walk
// through it.
//
// It does not make a walk atomic: a tree that changes during a walk is
// seen partly before and partly after the change, and each caller says
// what that means for it.
package dirwalk
