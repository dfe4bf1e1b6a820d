//go:build race

package main

// crashFileSize is smaller under the race detector, which slows the
// front-end's JSON handling of a large argument twenty-fold.
const crashFileSize = 256 << 10

// raceEnabled: this test binary has the race detector.
const raceEnabled = true
