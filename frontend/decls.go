package frontend

var writeTool = toolDecl[writeIn]{
	name:  "fs_write",
	title: "Write file",
	description: "Create or replace a whole file atomically. if_sha256: the sha256 from fs_stat (fails if " +
		"it changed since), or null to create; the reply's sha256 is the next one. " +
		"The directory must exist (fs_mkdir); for small edits use fs_replace. append: true adds at the end; " +
		"dry_run: true shows the diff. Drops setuid/setgid/capabilities.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).write,
}

var replaceTool = toolDecl[replaceIn]{
	name:  "fs_replace",
	title: "Edit file",
	description: "Replace exact text in a file atomically. Each edit's old must occur exactly once " +
		"(or set all); edits apply in order, all or none. if_sha256: the sha256 from fs_stat or the last " +
		"write; the reply's sha256 is the next one. Read it first with fs_read. no_match names the nearest " +
		"candidate; dry_run: true shows the diff. Mode as fs_write.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).replace,
}

var mkdirTool = toolDecl[mkdirIn]{
	name:  "fs_mkdir",
	title: "Make directory",
	description: "Create a directory and any missing parents; an existing directory is success. " +
		"fs_write needs the directory of a new file to exist.",
	hints: hints{idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).mkdir,
}

var moveTool = toolDecl[moveIn]{
	name:  "fs_move",
	title: "Move path",
	description: "Rename or move a file or directory within the root. It never replaces an existing " +
		"to: fs_delete that first if it must go. Optional if_sha256 (fs_stat) or if_tree_sha256 (fs_digest) guard it.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("from").acted(), onePath("to")},
	run:   (*server).move,
}

var deleteTool = toolDecl[deleteIn]{
	name:  "fs_delete",
	title: "Delete path",
	description: "Remove a file, a symlink (never its target) or an empty directory. A directory " +
		"with entries needs recursive: true; fs_list shows what it holds. The root cannot be removed. " +
		"Optional if_sha256 (fs_stat) or if_tree_sha256 (fs_digest) guard it.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path").acted()},
	run:   (*server).delete,
}

var spliceTool = toolDecl[spliceIn]{
	name:  "fs_splice",
	title: "Splice file",
	description: "Replace delete bytes at a byte offset with insert, atomically like fs_write. " +
		"It inserts, cuts or overwrites without resending the file. if_sha256 is the sha256 from fs_stat or fs_read (or null " +
		"to create the file at offset 0); the reply's sha256 is the next one. Offsets come from fs_read or fs_grep; an " +
		"offset past the end is refused. dry_run: true answers the diff and writes nothing.",
	hints: hints{destructive: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).splice,
}

var digestTool = toolDecl[digestIn]{
	name:  "fs_digest",
	title: "Digest tree",
	description: "Hash a directory's whole subtree, or one file, into tree_sha256. " +
		"It covers names as bytes, types, modes, file contents and symlink targets that stay inside; ignore files do not " +
		"apply. Pass it to fs_delete or fs_move as if_tree_sha256 to act only on the tree you saw. Large trees report progress.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path")},
	run:   (*server).digest,
}

var copyTool = toolDecl[copyIn]{
	name:  "fs_copy",
	title: "Copy path",
	description: "Copy a file, or with recursive: true a directory tree, to a new path. " +
		"to must not exist (fs_delete it first); it is never replaced. Content, mode, owner, extended attributes and ACLs " +
		"are copied, or the copy is refused. A directory appears whole or not at all; a tree holding a symlink, fifo, " +
		"socket or device is refused and nothing is copied.",
	hints: hints{},
	paths: []pathDecl{onePath("from").acted(), onePath("to")},
	run:   (*server).copy,
}

var patchTool = toolDecl[patchIn]{
	name:  "fs_patch",
	title: "Apply patch",
	description: "Apply a unified diff to one or more files: all change or none do, even across a crash. " +
		"Each hunk's lines must match the file exactly (no fuzz) at exactly one place, else no_match (with the nearest " +
		"candidate) or ambiguous_match. if_sha256 maps every touched path to its sha256 from fs_stat or fs_read, or to null " +
		"for a file it creates. /dev/null creates or deletes a file; missing parent directories are created and directories " +
		"the patch leaves empty are removed. dry_run: true answers the diffs and writes nothing; it needs no if_sha256 and answers " +
		"the if_sha256 (and if_sha256_base64) to pass to the real call. " +
		"A reply's undo token, when the server keeps what changes replace, reverses the whole patch with fs_undo.",
	hints: hints{destructive: true},
	paths: []pathDecl{keyedPaths("if_sha256")},
	run:   (*server).patch,
}

var undoTool = toolDecl[undoIn]{
	name:  "fs_undo",
	title: "Undo a change",
	description: "Restore what an earlier call replaced or removed, from its reply's undo token: " +
		"a deleted entry comes back to its path if that is free; a replaced file only if it is still exactly the file " +
		"that call wrote; a patch's files all or none. Otherwise precondition_failed and nothing changes. " +
		"The reply's own undo token reverses the undo.",
	hints:   hints{destructive: true},
	enabled: func(c *Config) bool { return c.Quarantine != "" },
	run:     (*server).undo,
}

var vcsStatusTool = toolDecl[vcsIn]{
	name:  "fs_vcs_status",
	title: "Version-control status",
	description: "The working copy's status (git status --porcelain=v2, hg status, svn status --xml; parsed): git's branch and one entry " +
		"per changed, renamed, unmerged, untracked path. Runs read-only in the command confinement; the repository's own " +
		"configuration (hooks, fsmonitor, filters, pagers) runs nothing.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path"), pathsUnder("files")},
	run:   (*server).vcsStatus,
}

var vcsDiffTool = toolDecl[vcsDiffIn]{
	name:  "fs_vcs_diff",
	title: "Version-control diff",
	description: "The working copy's unstaged diff (or, with staged, the index's), as text or base64, " +
		"bounded by max_bytes. Runs read-only in the command confinement; external diffs and textconv filters never run.",
	hints: hints{readOnly: true, idempotent: true},
	paths: []pathDecl{onePath("path"), pathsUnder("files")},
	run:   (*server).vcsDiff,
}
