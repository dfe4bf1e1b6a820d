// Package dirent reads directories with getdents, straight into a buffer,
// so that a name costs no allocation, and names the type each entry has.
// It trusts the kernel's records no further than their bounds: a record
// that does not fit the bytes read ends the read with ErrMalformed.
package dirent
