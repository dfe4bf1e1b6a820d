package checkpoint

import "strings"

// Within reports whether the root-relative path rel is dir or lies
// beneath it ("" holds all).
func Within(rel, dir string) bool {
	return dir == "" || rel == dir || strings.HasPrefix(rel, dir+"/")
}

// Action is what brings have (the entry at a path now, nil for nothing)
// back to want (the checkpoint's, nil for nothing): "delete" or "rmdir" a
// name made since, "create" or "mkdir" one removed, "restore" a file's
// content, "chmod" a mode, "type" when a file and a directory trade
// places, and "" when nothing differs.
func Action(want, have *Entry) string {
	switch {
	case want == nil && have.Type == File:
		return "delete"
	case want == nil:
		return "rmdir"
	case have == nil && want.Type == File:
		return "create"
	case have == nil:
		return "mkdir"
	case want.Type != have.Type:
		return "type"
	case want.Type == Dir && want.Mode != have.Mode:
		return "chmod"
	case want.Type == Dir:
		return ""
	case want.SHA != have.SHA:
		return "restore"
	case want.Mode != have.Mode:
		return "chmod"
	}
	return ""
}
