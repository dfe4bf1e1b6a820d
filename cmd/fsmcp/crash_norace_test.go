//go:build !race

package main

// crashFileSize is the size of the file TestCrashDuringWrite rewrites.
const crashFileSize = 8 << 20

// raceEnabled: this test binary has the race detector.
const raceEnabled = false
