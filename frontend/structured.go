package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Structured content (--structured-content): every tool declares an
// outputSchema, and every tool result carries its JSON document twice, as
// the text block and as structuredContent (the same value). Off by
// default: hosts that read structuredContent see the document once, but
// the reply is twice as large, and a host that reads both sees it twice.
//
// --max-response-bytes bounds the two together, so with the flag every
// tool fits its document into half the bound (documentConfig). Every
// result gets its structure in one place (withStructure): the tools'
// replies and refusals, the call gate's and the stdio layer's.

// documentConfig is the configuration the tools see: with
// --structured-content, a reply carries its document twice, and
// MaxResponseBytes is what one copy may take.
func documentConfig(cfg *Config) *Config {
	if !cfg.StructuredContent {
		return cfg
	}
	c := *cfg
	c.MaxResponseBytes /= 2
	return &c
}

// withStructure sets res's structuredContent to its document, the JSON
// of its first (text) block. A result that asks the client for input
// (approvals at 2026-07-28) carries no document and is left alone.
func withStructure(res *mcp.CallToolResult) {
	if res.StructuredContent != nil || res.InputRequests != nil || res.RequestState != "" || len(res.Content) == 0 {
		return
	}
	switch tc := res.Content[0].(type) {
	case *mcp.TextContent:
		res.StructuredContent = json.RawMessage(tc.Text)
	case *splicedText:
		res.StructuredContent = json.RawMessage(tc.document())
	}
}

// structuredResults is a receiving middleware that gives every tool
// result its structuredContent.
func structuredResults(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if ctr, ok := res.(*mcp.CallToolResult); ok && err == nil && method == "tools/call" {
			withStructure(ctr)
		}
		return res, err
	}
}

// outputSchema is the outputSchema of the tool named name: an object that
// is the tool's own reply or the error document, for a refusal is a
// structured result too. MCP 2025-11-25 wants type "object" at the top.
func outputSchema(name string) *jsonschema.Schema {
	shape, ok := replyShapes[name]
	if !ok {
		panic("BUG(fsmcp): no reply shape for " + name)
	}
	return &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{shape(), errorShapeSchema()}}
}

// replyShapes gives, by tool, the schema of its success document.
var replyShapes = map[string]func() *jsonschema.Schema{
	"fs_stat":        okShape[statShape],
	"fs_list":        okShape[listShape],
	"fs_read":        okShape[readShape],
	"fs_read_many":   readManyShapeSchema,
	"fs_glob":        okShape[globShape],
	"fs_grep":        okShape[grepShape],
	"fs_tree":        okShape[treeShape],
	"fs_view":        okShape[viewShape],
	"fs_write":       okShape[writeShape],
	"fs_replace":     okShape[replaceShape],
	"fs_mkdir":       okShape[mkdirShape],
	"fs_move":        okShape[moveShape],
	"fs_delete":      okShape[deleteShape],
	"fs_splice":      okShape[writeShape],
	"fs_digest":      okShape[digestShape],
	"fs_copy":        okShape[copyShape],
	"fs_patch":       okShape[patchShape],
	"fs_undo":        okShape[undoShape],
	"fs_checkpoint":  okShape[checkpointShape],
	"fs_checkpoints": okShape[checkpointsShape],
	"fs_rewind":      okShape[rewindShape],
	"fs_exec":        okShape[execShape],
	"fs_vcs_status":  okShape[vcsStatusShape],
	"fs_vcs_diff":    okShape[vcsDiffShape],
}

// okShape is the schema of a success document of type T: ok is true.
func okShape[T any]() *jsonschema.Schema {
	s := shapeSchema[T]()
	var yes any = true
	s.Properties["ok"].Const = &yes
	return s
}

// errorShapeSchema is the schema of the error document: ok is false, and
// code one of the contract's codes.
func errorShapeSchema() *jsonschema.Schema {
	s := shapeSchema[errorShape]()
	var no any = false
	s.Properties["ok"].Const = &no
	var codes []any
	for v := range fsmcpv1.ErrorCode_name {
		if c := fsmcpv1.ErrorCode(v); c != fsmcpv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
			codes = append(codes, codeName(c))
		}
	}
	slices.SortFunc(codes, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	s.Properties["error"].Properties["code"].Enum = codes
	return s
}

// readManyShapeSchema is fs_read_many's: each entry of files is fs_read's
// reply or an error entry.
func readManyShapeSchema() *jsonschema.Schema {
	s := okShape[readManyShape]()
	s.Properties["files"].Items = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{okShape[readShape](), shapeSchema[readManyError]()}}
	return s
}

// shapeSchema infers T's schema and tidies it: an optional property is
// absent rather than null, and a list is never null. Only a property
// that is required and a pointer (fs_exec's exit and signal) may be null.
func shapeSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("BUG(fsmcp): reply schema: %v", err))
	}
	tidy(s)
	return s
}

func tidy(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		if len(p.Types) == 2 && p.Types[0] == "null" && (p.Types[1] == "array" || !slices.Contains(s.Required, name)) {
			p.Type, p.Types = p.Types[1], nil
		}
		tidy(p)
	}
	tidy(s.Items)
}

// The shapes of the replies, for their outputSchema. The documents are
// written field by field (obj, in each tool's file), which is what keeps
// them fast; these types say what those writers produce. A test validates
// every kind of reply against the schema inferred from them, and the
// schema admits no property a type does not name, so a reply field added
// without its type fails it. A name that is not valid UTF-8 comes as its
// _base64 twin instead, so both are optional.

type errorShape struct {
	OK    bool        `json:"ok"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code          string        `json:"code"`
	Message       string        `json:"message"`
	Path          *string       `json:"path,omitempty"`
	PathBase64    *string       `json:"path_base64,omitempty"`
	CurrentSHA256 *string       `json:"current_sha256,omitempty"`
	Count         *int64        `json:"count,omitempty"`
	Nearest       *nearestShape `json:"nearest,omitempty"`
	MissingDir    *string       `json:"missing_directory,omitempty"`
	MissingDirB64 *string       `json:"missing_directory_base64,omitempty"`
	Offset        *int64        `json:"offset,omitempty"`
	// Conflicts are a refused rewind's.
	Conflicts []conflictShape `json:"conflicts,omitempty"`
}

type conflictShape struct {
	pathShape
	Reason string `json:"reason"`
	Lost   *bool  `json:"lost,omitempty"`
}

type nearestShape struct {
	LineNumber   int64  `json:"line_number"`
	Offset       int64  `json:"offset"`
	Differs      string `json:"differs"`
	MatchedBytes *int64 `json:"matched_bytes,omitempty"`
}

type pathShape struct {
	Path       *string `json:"path,omitempty"`
	PathBase64 *string `json:"path_base64,omitempty"`
}

type fromToShape struct {
	From       *string `json:"from,omitempty"`
	FromBase64 *string `json:"from_base64,omitempty"`
	To         *string `json:"to,omitempty"`
	ToBase64   *string `json:"to_base64,omitempty"`
}

// pageShape is how a listing cut at the bound says how to continue.
type pageShape struct {
	Truncated *bool   `json:"truncated,omitempty"`
	Cursor    *string `json:"cursor,omitempty"`
}

type statShape struct {
	OK bool `json:"ok"`
	pathShape
	Type          string            `json:"type"`
	Size          int64             `json:"size"`
	Mtime         string            `json:"mtime"`
	Mode          string            `json:"mode"`
	Nlink         int64             `json:"nlink"`
	SHA256        *string           `json:"sha256,omitempty"`
	Target        *string           `json:"target,omitempty"`
	TargetBase64  *string           `json:"target_base64,omitempty"`
	TargetEscapes *bool             `json:"target_escapes,omitempty"`
	Confinement   *confinementShape `json:"confinement,omitempty"`
}

type confinementShape struct {
	LandlockABI           int64  `json:"landlock_abi"`
	KernelLandlockABI     int64  `json:"kernel_landlock_abi"`
	ReadOnly              bool   `json:"read_only"`
	ReadOnlyEnforced      bool   `json:"read_only_enforced"`
	NetworkDenied         bool   `json:"network_denied"`
	Seccomp               string `json:"seccomp"`
	SeccompDeniedSyscalls int64  `json:"seccomp_denied_syscalls"`
	RGVersion             string `json:"rg_version"`
	PatchJournal          string `json:"patch_journal"`
	Policy                struct {
		Protect []string `json:"protect"`
		Deny    []string `json:"deny"`
		Derived []struct {
			Path        string `json:"path"`
			DerivedFrom string `json:"derived_from"`
		} `json:"derived"`
	} `json:"policy"`
	Selftest []struct {
		Probe   string `json:"probe"`
		Result  string `json:"result"`
		Refused bool   `json:"refused"`
	} `json:"selftest"`
	Exec *execConfinementShape `json:"exec,omitempty"`
}

type execConfinementShape struct {
	LandlockABI           int64    `json:"landlock_abi"`
	Programs              []string `json:"programs"`
	ExecFiles             []string `json:"exec_files"`
	ReadDirs              []string `json:"read_dirs"`
	Writable              bool     `json:"writable"`
	NetworkDenied         bool     `json:"network_denied"`
	NoexecMounts          bool     `json:"noexec_mounts"`
	Seccomp               string   `json:"seccomp"`
	SeccompDeniedSyscalls int64    `json:"seccomp_denied_syscalls"`
	Namespaces            []string `json:"namespaces"`
	Rlimits               []string `json:"rlimits"`
	Env                   []string `json:"env"`
	MaxTimeoutS           int64    `json:"max_timeout_s"`
	Vcs                   []string `json:"vcs"`
	VcsExecFiles          []string `json:"vcs_exec_files"`
	VcsReadDirs           []string `json:"vcs_read_dirs"`
	Pids                  struct {
		Controller string `json:"controller"`
		Cgroup     string `json:"cgroup,omitempty"`
		Max        int64  `json:"max,omitempty"`
		Reason     string `json:"reason,omitempty"`
	} `json:"pids"`
	MetadataGuards []string `json:"metadata_guards"`
	Selftest       []struct {
		Probe   string `json:"probe"`
		Result  string `json:"result"`
		Refused bool   `json:"refused"`
	} `json:"selftest"`
	Native  bool     `json:"native"`
	Cache   string   `json:"cache"`
	Helpers []string `json:"helpers"`
}

type listShape struct {
	OK bool `json:"ok"`
	pathShape
	Entries []struct {
		Name       *string `json:"name,omitempty"`
		NameBase64 *string `json:"name_base64,omitempty"`
		Type       string  `json:"type"`
		Size       int64   `json:"size"`
		Mtime      string  `json:"mtime"`
		Mode       string  `json:"mode"`
	} `json:"entries"`
	Totals *struct {
		Files       int64 `json:"files"`
		Directories int64 `json:"directories"`
		Bytes       int64 `json:"bytes"`
	} `json:"totals,omitempty"`
	pageShape
}

type readShape struct {
	OK bool `json:"ok"`
	pathShape
	Content       string  `json:"content"`
	Encoding      string  `json:"encoding"`
	Offset        int64   `json:"offset"`
	Length        int64   `json:"length"`
	Size          int64   `json:"size"`
	EOF           bool    `json:"eof"`
	Truncated     *bool   `json:"truncated,omitempty"`
	NextOffset    *int64  `json:"next_offset,omitempty"`
	FirstLine     *int64  `json:"first_line,omitempty"`
	LineCount     *int64  `json:"line_count,omitempty"`
	TextTruncated *bool   `json:"text_truncated,omitempty"`
	LineLength    *int64  `json:"line_length,omitempty"`
	NextLine      *int64  `json:"next_line,omitempty"`
	Binary        *bool   `json:"binary,omitempty"`
	SHA256        *string `json:"sha256,omitempty"`
	SHA256Omitted *bool   `json:"sha256_omitted,omitempty"`
	Charset       *string `json:"charset,omitempty"`
}

type readManyShape struct {
	OK        bool  `json:"ok"`
	Files     []any `json:"files"`
	Complete  int64 `json:"complete"`
	Truncated *bool `json:"truncated,omitempty"`
}

// readManyError is an fs_read_many entry that failed on its own.
type readManyError struct {
	OK bool `json:"ok"`
	pathShape
	Error errorDetail `json:"error"`
}

type globShape struct {
	OK bool `json:"ok"`
	pathShape
	Files []struct {
		pathShape
		Mtime *string `json:"mtime,omitempty"`
	} `json:"files"`
	Total      int64  `json:"total"`
	Unreadable *int64 `json:"unreadable,omitempty"`
	pageShape
}

// grepShape covers the three outputs: results (matches), files with
// their matches (files), or the count and files with theirs (count).
type grepShape struct {
	OK bool `json:"ok"`
	pathShape
	Count   *int64 `json:"count,omitempty"`
	Results []struct {
		Type string `json:"type"`
		pathShape
		LineNumber    int64   `json:"line_number"`
		Offset        int64   `json:"offset"`
		Text          *string `json:"text,omitempty"`
		TextBase64    *string `json:"text_base64,omitempty"`
		TextTruncated *bool   `json:"text_truncated,omitempty"`
		LineLength    *int64  `json:"line_length,omitempty"`
		Submatches    []struct {
			Start int64 `json:"start"`
			End   int64 `json:"end"`
		} `json:"submatches"`
		SubmatchesTruncated *bool `json:"submatches_truncated,omitempty"`
	} `json:"results,omitempty"`
	Files []struct {
		pathShape
		Matches *int64 `json:"matches,omitempty"`
		Count   *int64 `json:"count,omitempty"`
	} `json:"files,omitempty"`
	FilesMatched      int64  `json:"files_matched"`
	Matches           *int64 `json:"matches,omitempty"`
	Unreadable        *int64 `json:"unreadable,omitempty"`
	MaxResultsReached *bool  `json:"max_results_reached,omitempty"`
	pageShape
}

type treeShape struct {
	OK bool `json:"ok"`
	pathShape
	Entries []struct {
		pathShape
		Type string `json:"type"`
		Size *int64 `json:"size,omitempty"`
		More *bool  `json:"more,omitempty"`
	} `json:"entries"`
	Total      int64  `json:"total"`
	Unreadable *int64 `json:"unreadable,omitempty"`
	pageShape
}

type viewShape struct {
	OK bool `json:"ok"`
	pathShape
	MimeType string `json:"mime_type"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	// Content names the kind of block after the document.
	Content string `json:"content"`
}

// previewShape is a dry run's answer (previewFields), and undoShape the
// token of what a change displaced (withUndo).
type previewShape struct {
	DryRun        *bool   `json:"dry_run,omitempty"`
	Diff          *string `json:"diff,omitempty"`
	DiffBase64    *string `json:"diff_base64,omitempty"`
	DiffTruncated *bool   `json:"diff_truncated,omitempty"`
}

type undoTokenShape struct {
	Undo *string `json:"undo,omitempty"`
	// Evicted names the checkpoints the change's kept version evicted.
	Evicted *string `json:"evicted_checkpoint,omitempty"`
}

// writeShape is fs_write's reply, and fs_splice's.
type writeShape struct {
	OK bool `json:"ok"`
	pathShape
	SHA256        string `json:"sha256"`
	Size          int64  `json:"size"`
	Created       bool   `json:"created"`
	BrokeHardLink bool   `json:"broke_hard_link"`
	previewShape
	undoTokenShape
}

type replaceShape struct {
	OK bool `json:"ok"`
	pathShape
	Replacements  int64  `json:"replacements"`
	SHA256        string `json:"sha256"`
	Size          int64  `json:"size"`
	BrokeHardLink bool   `json:"broke_hard_link"`
	previewShape
	undoTokenShape
}

type mkdirShape struct {
	OK bool `json:"ok"`
	pathShape
	Created bool `json:"created"`
}

type moveShape struct {
	OK bool `json:"ok"`
	fromToShape
}

type deleteShape struct {
	OK bool `json:"ok"`
	pathShape
	Removed int64 `json:"removed"`
	undoTokenShape
}

type digestShape struct {
	OK bool `json:"ok"`
	pathShape
	Type        string `json:"type"`
	TreeSHA256  string `json:"tree_sha256"`
	Files       int64  `json:"files"`
	Directories int64  `json:"directories"`
	Bytes       int64  `json:"bytes"`
}

type copyShape struct {
	OK bool `json:"ok"`
	fromToShape
	Files       int64 `json:"files"`
	Directories int64 `json:"directories"`
	Bytes       int64 `json:"bytes"`
}

type patchShape struct {
	OK     bool  `json:"ok"`
	DryRun *bool `json:"dry_run,omitempty"`
	Files  []struct {
		pathShape
		Created       bool    `json:"created"`
		Deleted       bool    `json:"deleted"`
		Hunks         int64   `json:"hunks"`
		SHA256        *string `json:"sha256,omitempty"`
		Size          *int64  `json:"size,omitempty"`
		BrokeHardLink *bool   `json:"broke_hard_link,omitempty"`
		Diff          *string `json:"diff,omitempty"`
		DiffBase64    *string `json:"diff_base64,omitempty"`
		DiffTruncated *bool   `json:"diff_truncated,omitempty"`
		MovedTo       *string `json:"moved_to,omitempty"`
		MovedToBase64 *string `json:"moved_to_base64,omitempty"`
	} `json:"files"`
	Format         string             `json:"format"`
	DiffTruncated  *bool              `json:"diff_truncated,omitempty"`
	IfSHA256       map[string]*string `json:"if_sha256,omitempty"`
	IfSHA256Base64 map[string]*string `json:"if_sha256_base64,omitempty"`
	undoTokenShape
}

type checkpointShape struct {
	OK         bool    `json:"ok"`
	ID         string  `json:"id"`
	Label      string  `json:"label"`
	Created    string  `json:"created"`
	TreeSHA256 string  `json:"tree_sha256"`
	Files      int64   `json:"files"`
	Evicted    *string `json:"evicted_checkpoint,omitempty"`
}

type checkpointsShape struct {
	OK          bool `json:"ok"`
	Checkpoints []struct {
		ID      string `json:"id"`
		Label   string `json:"label"`
		Created string `json:"created"`
		Files   int64  `json:"files"`
		Bytes   int64  `json:"bytes"`
	} `json:"checkpoints"`
}

type rewindShape struct {
	OK      bool  `json:"ok"`
	DryRun  *bool `json:"dry_run,omitempty"`
	Changes []struct {
		pathShape
		Action  string  `json:"action"`
		OldSize *int64  `json:"old_size,omitempty"`
		NewSize *int64  `json:"new_size,omitempty"`
		Diff    *string `json:"diff,omitempty"`
	} `json:"changes"`
	Conflicts  []conflictShape `json:"conflicts,omitempty"`
	Kept       []pathShape     `json:"kept,omitempty"`
	Checkpoint *string         `json:"checkpoint,omitempty"`
	undoTokenShape
}

type undoShape struct {
	OK bool `json:"ok"`
	pathShape
	Type string `json:"type"`
	undoTokenShape
}

// commandShape is how a command ended (commandResult): exit is null when
// a signal ended it, signal null when it exited.
type commandShape struct {
	Exit            *int64  `json:"exit"`
	Signal          *string `json:"signal"`
	TimedOut        bool    `json:"timed_out"`
	DurationMS      int64   `json:"duration_ms"`
	Stderr          string  `json:"stderr"`
	StderrEncoding  string  `json:"stderr_encoding"`
	StderrTruncated bool    `json:"stderr_truncated"`
}

type execShape struct {
	OK bool `json:"ok"`
	commandShape
	Stdout          string `json:"stdout"`
	StdoutEncoding  string `json:"stdout_encoding"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	PastCallTimeout bool   `json:"past_call_timeout,omitempty"`
}

type vcsStatusShape struct {
	OK      bool   `json:"ok"`
	Backend string `json:"backend"`
	pathShape
	Branch struct {
		Oid      *string `json:"oid,omitempty"`
		Head     *string `json:"head,omitempty"`
		Upstream *string `json:"upstream,omitempty"`
		Ahead    *int64  `json:"ahead,omitempty"`
		Behind   *int64  `json:"behind,omitempty"`
	} `json:"branch"`
	Entries []struct {
		Kind string  `json:"kind"`
		XY   *string `json:"xy,omitempty"`
		pathShape
		OrigPath       *string `json:"orig_path,omitempty"`
		OrigPathBase64 *string `json:"orig_path_base64,omitempty"`
		Score          *string `json:"score,omitempty"`
		Submodule      *string `json:"submodule,omitempty"`
	} `json:"entries"`
	EntriesTruncated bool `json:"entries_truncated"`
	commandShape
}

type vcsDiffShape struct {
	OK      bool   `json:"ok"`
	Backend string `json:"backend"`
	pathShape
	Diff          string `json:"diff"`
	DiffEncoding  string `json:"diff_encoding"`
	DiffTruncated bool   `json:"diff_truncated"`
	commandShape
}
