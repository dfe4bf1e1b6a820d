// Package hunks applies the changes of a patch (a unified diff's hunks or
// an envelope's chunks) to a file's bytes, exactly: no fuzz, each change
// found once, in order.
package hunks
