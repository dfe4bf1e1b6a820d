// Package checkpoint is the on-disk record of a checkpoint: the state of
// a tree (each directory's and regular file's root-relative path, mode,
// size and content sha256) at one moment, kept as one file in the worker's
// state directory. It copies no file content and trusts nothing it reads
// back beyond its own checksum: a record that does not verify is not
// used.
//
// It does not record symlinks, fifos, sockets or devices, nor owners,
// extended attributes or timestamps: those come back from the kept
// version of each file a rewind restores.
package checkpoint
