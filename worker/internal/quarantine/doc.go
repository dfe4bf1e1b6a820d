// Package quarantine is the on-disk index of the worker's quarantine: an
// append-only log, in the state directory, of what each quarantined name
// was (its path, its kind, the file that replaced it) and which undo
// tokens were spent, and the key that seals the tokens. With it, entries
// and tokens outlive the worker that made them.
//
// It trusts what it reads only as far as the worker's state directory is
// the worker's own: a line that does not parse ends the log there.
package quarantine
