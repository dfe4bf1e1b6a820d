// Package patchlog is the journal of fs_patch's commit (and a rewind's)
// in the state directory: its format, writing it durably, and undoing
// one entry by what the inodes at its names show.
package patchlog
