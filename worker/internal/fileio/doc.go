// Package fileio streams a file's bytes through the worker: hashing a
// range, counting its lines, copying a range to another file by the
// kernel's shared extents where it can. Every loop checks its context, so a
// cancelled call stops reading a large file.
package fileio
