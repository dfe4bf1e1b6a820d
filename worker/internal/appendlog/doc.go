// Package appendlog holds the append journal's slots in the state
// directory: each a reusable file that records, while one append runs,
// the file's old and new sizes and sha256s, so that recovery can cut a
// torn append back.
package appendlog
