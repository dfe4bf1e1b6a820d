package worker

import "strings"

// tempPrefix starts the name of every temp file the worker creates for an
// atomic write. Such names are never listed or searched, and a crash's
// leftovers are swept at start-up.
const tempPrefix = ".fsmcp-tmp-"

func isTempName(name string) bool { return strings.HasPrefix(name, tempPrefix) }
