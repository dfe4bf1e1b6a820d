package frontend

// What fs_vcs_status and fs_vcs_diff share; each has its tool_<name>.go.

// vcsIn is what fs_vcs_status takes, and fs_vcs_diff besides its own.
type vcsIn struct {
	Backend    string   `json:"backend" jsonschema:"the version-control system: one the operator enabled with --vcs (git, hg or svn)"`
	Path       *string  `json:"path,omitempty" jsonschema:"the working copy's directory (or one inside it); the root when left out"`
	PathBase64 *string  `json:"path_base64,omitempty" jsonschema:"the path as base64, for names that are not UTF-8"`
	Files      []string `json:"files,omitempty" jsonschema:"restrict to these paths, relative to path (literal names, never options or patterns)"`
	TimeoutS   *int64   `json:"timeout_s,omitempty" jsonschema:"seconds before the command is killed; default 30"`
}

// vcsTools lists the version-control tools when --vcs names a backend.
func vcsTools(cfg *Config) []*tool {
	if len(cfg.Exec.VCS) == 0 {
		return nil
	}
	return []*tool{vcsStatusTool.tool(), vcsDiffTool.tool()}
}

// vcsArgs checks what both tools share.
func (s *server) vcsArgs(in *vcsIn) (path []byte, files [][]byte, timeoutMS int64, err error) {
	if path, err = rootedPath("path", in.Path, in.PathBase64); err != nil {
		return nil, nil, 0, err
	}
	for _, f := range in.Files {
		files = append(files, []byte(f))
	}
	timeout, err := s.timeoutArg(in.TimeoutS)
	return path, files, timeout.Milliseconds(), err
}
