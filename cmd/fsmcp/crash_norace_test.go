//go:build !race

package main

// crashFileSize is the size of the file TestCrashDuringWrite rewrites.
const crashFileSize = 8 << 20
