// Package fold tells whether a directory compares names without case: a
// casefolding directory (ext4's and f2fs's casefold flag, tmpfs's) or a
// filesystem that folds every directory (FAT, exFAT, NTFS, SMB). It only
// asks the kernel; what a folding directory means for the policy is the
// worker's.
package fold
