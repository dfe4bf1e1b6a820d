// Package lines finds lines in a file as fs_read counts them. Lines are
// rg's: a line is the bytes up to and including a '\n' (a '\r'
// before it is part of the line), and a last line without '\n' counts.
// Line n starts just after the (n-1)th '\n' of the file, so the number of a
// line is one more than the count of '\n' before it; fs_grep reports the
// same numbers because rg counts the same way.
//
// A line index remembers, for each recently read version of a file, how
// many '\n' lie before every stride-th byte, so that line 250000 of a large
// file is found by scanning at most one stride, not the whole prefix. It
// is keyed like the hash cache (device, inode, size, mtime, ctime) and
// bounded: at most maxMarksPerFile marks per file (the stride doubles for
// larger files) and maxMarks in all, the oldest file forgotten first.
package lines
