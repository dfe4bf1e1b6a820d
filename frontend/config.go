package frontend

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsmcp/fsmcp/proto/link"
	"github.com/fsmcp/fsmcp/sandbox"
)

// Config is the parsed command line.
type Config struct {
	Root             string
	ReadOnly         bool
	MaxResponseBytes int64
	// StructuredContent declares outputSchemas and repeats each reply's
	// document as structuredContent, both within MaxResponseBytes.
	StructuredContent bool
	// MaxMediaBytes bounds the file fs_view shows.
	MaxMediaBytes   int64
	Transport       string
	Listen          string
	TokenFile       string
	AllowRemote     bool
	AllowOrigins    []string
	AuditLog        string
	ToolsPrefix     string
	RG              string
	AllowNoLandlock bool
	AllowBroadRoot  bool
	HTTPReadTimeout time.Duration
	HTTPSessionIdle time.Duration
	HTTPMaxSessions int
	CallTimeout     time.Duration
	MaxCalls        int
	MaxSessionCalls int
	// Ask names the tools, or classes of tools, that wait for the
	// person's approval (--ask).
	Ask []string
	// Protect and Deny are the operator's --protect and --deny globs;
	// NoDefaultProtect drops sandbox.DefaultProtect (Policy joins them).
	Protect          []string
	Deny             []string
	NoDefaultProtect bool
	// The worker's budgets (worker.Limits); zero means its default.
	MaxFileBytes int64
	WorkerMemory int64
	MaxRG        int
	MaxHeavy     int
	QueueTimeout time.Duration
	ToolHelp     bool
	// Quarantine is the directory that keeps what deletes and writes
	// remove, bounded by QuarantineBytes.
	Quarantine      string
	QuarantineBytes int64
	// Rules is the --rules file.
	Rules   string
	Version bool
	// Verbose prints each process's confinement at start.
	Verbose bool
	Help    bool
	// set holds the flags given on the command line.
	set map[string]bool
	// Exec holds the flags that turn commands on.
	Exec ExecOptions
	// StateDir is --state-dir ("": the default, defaultStateDir);
	// stateSub is the root's own subdirectory there, which check
	// resolves. DiscardJournal is --discard-journal.
	StateDir       string
	stateSub       string
	DiscardJournal string
}

// defaultMaxResponseBytes bounds a reply where agent hosts still take it
// whole: they truncate or refuse tool results far below 256 KiB.
const defaultMaxResponseBytes = 64 << 10

// defaultMaxMediaBytes and maxMediaBytesLimit bound fs_view's file: a
// picture a model can take in, and well inside one gRPC message.
const (
	defaultMaxMediaBytes = 5 << 20
	maxMediaBytesLimit   = 64 << 20
)

// minResponseBytes keeps a page able to hold at least one entry with the
// longest legal name, base64-encoded.
const minResponseBytes = 4096

const usage = `usage: fsmcp --root DIR [flags]

Serves one directory to an MCP client as a rooted filesystem.

`

func parseFlags(args []string, stderr io.Writer) (*Config, *flag.FlagSet, error) {
	c := &Config{}
	fs := flag.NewFlagSet("fsmcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Root, "root", "", "directory to serve (required)")
	fs.BoolVar(&c.ReadOnly, "read-only", false, "serve only the read tools; the kernel refuses writes")
	fs.Int64Var(&c.MaxResponseBytes, "max-response-bytes", defaultMaxResponseBytes, "upper bound of every reply's JSON document")
	fs.BoolVar(&c.StructuredContent, "structured-content", false,
		"declare each tool's outputSchema and repeat each reply's document as structuredContent; both count within --max-response-bytes")
	fs.Int64Var(&c.MaxMediaBytes, "max-media-bytes", defaultMaxMediaBytes, "largest picture or sound fs_view shows; a larger file is too_large, unread")
	fs.StringVar(&c.Transport, "transport", "stdio", "stdio or http")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address for --transport http")
	fs.StringVar(&c.TokenFile, "token-file", "", "file holding the bearer token for --transport http (default: generate one and print it)")
	fs.BoolVar(&c.AllowRemote, "allow-remote", false, "let --listen name a non-loopback address")
	fs.Func("allow-origin", "an Origin (scheme://host[:port]) also accepted besides loopback; repeatable", func(v string) error {
		o, err := parseOrigin(v)
		if err != nil {
			return err
		}
		c.AllowOrigins = append(c.AllowOrigins, o)
		return nil
	})
	fs.DurationVar(&c.HTTPReadTimeout, "http-read-timeout", 60*time.Second, "time a client has to send one HTTP request, headers and body")
	fs.DurationVar(&c.HTTPSessionIdle, "http-session-idle", 10*time.Minute, "close an HTTP session unused this long")
	fs.IntVar(&c.HTTPMaxSessions, "http-max-sessions", 1024, "HTTP sessions kept at most; a new one closes the one idle the longest")
	fs.StringVar(&c.AuditLog, "audit-log", "", "append the audit log (one JSON line per call) to this file instead of stderr")
	fs.StringVar(&c.ToolsPrefix, "tools-prefix", "", "prefix for every tool name")
	fs.StringVar(&c.RG, "rg", "", "ripgrep binary (default: rg on PATH)")
	fs.BoolVar(&c.AllowNoLandlock, "allow-no-landlock", false, "run on a kernel without Landlock, with only os.Root as containment")
	fs.BoolVar(&c.AllowBroadRoot, "allow-broad-root", false, "let --root be / or your home directory itself")
	fs.DurationVar(&c.CallTimeout, "call-timeout", 60*time.Second, "deadline of one tool call")
	fs.Func("ask", "ask the person at the client (MCP elicitation) before calls of this tool, or of a class: writes, destructive, exec; repeatable", func(v string) error {
		c.Ask = append(c.Ask, v)
		return nil
	})
	fs.Func("protect", "make paths matching this glob read-only for every tool (at any depth unless it starts with /); repeatable, added to the defaults", func(v string) error {
		c.Protect = append(c.Protect, v)
		return nil
	})
	fs.BoolVar(&c.NoDefaultProtect, "no-default-protect", false, "do not protect "+strings.Join(sandbox.DefaultProtect, " ")+" by default")
	fs.Func("deny", "give no content of paths matching this glob to any tool (names are still listed); repeatable", func(v string) error {
		c.Deny = append(c.Deny, v)
		return nil
	})
	fs.StringVar(&c.Quarantine, "quarantine", "", "keep what deletes and writes remove in this directory (outside --root, same filesystem), for fs_undo")
	fs.Int64Var(&c.QuarantineBytes, "quarantine-bytes", defaultQuarantineBytes, "bound of --quarantine; the oldest entries go first")
	fs.StringVar(&c.Rules, "rules", "", "ordered allow|deny|ask TOOL PATH-GLOB lines, first match wins; read again when the file changes")
	fs.StringVar(&c.StateDir, "state-dir", "", "directory outside --root for fs_patch's recovery journals, one subdirectory per root (default: $STATE_DIRECTORY, else $XDG_STATE_HOME/fsmcp, else ~/.local/state/fsmcp)")
	fs.StringVar(&c.DiscardJournal, "discard-journal", "", "set aside this interrupted fs_patch journal, which cannot be completed (its --quarantine is gone), and start")
	fs.BoolVar(&c.ToolHelp, "tool-help", false, "print the tools and parameters the other flags would serve, and exit")
	fs.IntVar(&c.MaxCalls, "max-calls", defaultMaxCalls, "tool calls running at once on the server; more wait up to 10 s for a slot, then are answered unavailable")
	fs.IntVar(&c.MaxSessionCalls, "max-session-calls", defaultMaxSessionCalls, "tool calls running at once in one session (stdio, or one HTTP session); at most --max-calls (default 16, or --max-calls when lower)")
	fs.Int64Var(&c.MaxFileBytes, "max-file-bytes", 0, "largest file an edit may hold or produce (default: a quarter of --worker-memory, at most 128 MiB; at most half of it)")
	fs.Int64Var(&c.WorkerMemory, "worker-memory", 0, "the worker's soft memory limit and budget in bytes (default: half the memory available at start, 64 MiB to 1 GiB)")
	fs.IntVar(&c.MaxRG, "max-rg", 0, "rg processes running at once (default: 2 per core)")
	fs.IntVar(&c.MaxHeavy, "max-heavy", 0, "writes, edits, deletes, mkdirs and hashes running at once (default: 4 per core)")
	fs.DurationVar(&c.QueueTimeout, "queue-timeout", 0, "how long a call waits for a busy worker before unavailable (default 10s)")
	fs.BoolVar(&c.Version, "version", false, "print the version and exit")
	fs.BoolVar(&c.Verbose, "verbose", false, "say on stderr at start how each process confined itself (fs_stat of the root attests the same)")
	execFlags(fs, &c.Exec)
	fs.Usage = func() {}
	// One line for a bad command line; the full usage only for --help.
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.Help = true
			return c, fs, nil
		}
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	return c, fs, nil
}

// checkTools validates the flags that decide which tools are served and
// how; --tool-help needs no more than these.
func (c *Config) checkTools() error {
	_, err := askedTools(c.Ask, c.ToolsPrefix, append(allTools(), commandTools(c)...))
	return err
}

// Policy is the protected and denied paths the flags ask for, defaults
// included unless --no-default-protect.
func (c *Config) Policy() sandbox.Policy {
	var p sandbox.Policy
	if !c.NoDefaultProtect {
		p.Protect = append(p.Protect, sandbox.DefaultProtect...)
	}
	p.Protect = append(p.Protect, c.Protect...)
	p.Deny = append(p.Deny, c.Deny...)
	return p
}

// check validates the configuration and resolves --root and --rg. It runs
// before the front-end confines itself.
func (c *Config) check() error {
	if err := c.checkTools(); err != nil {
		return err
	}
	if _, err := c.Policy().Compile(); err != nil {
		return err
	}
	if c.Root == "" {
		return errors.New("--root is required")
	}
	fi, err := os.Stat(c.Root)
	if err != nil {
		return fmt.Errorf("--root %s: %w", c.Root, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("--root %s: not a directory", c.Root)
	}
	if c.MaxResponseBytes < minResponseBytes {
		return fmt.Errorf("--max-response-bytes must be at least %d", minResponseBytes)
	}
	if c.MaxResponseBytes > maxResponseBytesLimit {
		return fmt.Errorf("--max-response-bytes must be at most %d", maxResponseBytesLimit)
	}
	// A root that is the whole filesystem or the home directory is
	// refused for what it is, before the directories checked against it.
	if err := c.checkBroadRoot(); err != nil {
		return err
	}
	if err := c.checkQuarantine(); err != nil {
		return err
	}
	if err := c.checkRules(); err != nil {
		return err
	}
	if err := c.checkStateDir(); err != nil {
		return err
	}
	if c.MaxMediaBytes < 1 || c.MaxMediaBytes > maxMediaBytesLimit {
		return fmt.Errorf("--max-media-bytes must be between 1 and %d", maxMediaBytesLimit)
	}
	if c.CallTimeout <= 0 {
		return errors.New("--call-timeout must be positive")
	}
	if c.MaxCalls < 1 || c.MaxCalls > maxCallsLimit {
		return fmt.Errorf("--max-calls must be between 1 and %d", maxCallsLimit)
	}
	if !c.set["max-session-calls"] {
		// The default follows the server's bound the operator chose.
		c.MaxSessionCalls = min(defaultMaxSessionCalls, c.MaxCalls)
	}
	if c.MaxSessionCalls < 1 || c.MaxSessionCalls > c.MaxCalls {
		return fmt.Errorf("--max-session-calls must be between 1 and --max-calls (%d); lower it, or raise --max-calls", c.MaxCalls)
	}
	if err := checkToolsPrefix(c.ToolsPrefix); err != nil {
		return err
	}
	if c.MaxFileBytes < 0 || c.WorkerMemory < 0 || c.MaxRG < 0 || c.MaxHeavy < 0 || c.QueueTimeout < 0 {
		return errors.New("--max-file-bytes, --worker-memory, --max-rg, --max-heavy and --queue-timeout must not be negative")
	}
	switch c.Transport {
	case "stdio":
		for _, f := range httpFlags {
			if c.set[f] {
				return fmt.Errorf("--%s applies to --transport http only", f)
			}
		}
	case "http":
		if err := checkListen(c.Listen, c.AllowRemote); err != nil {
			return err
		}
		switch {
		case c.HTTPReadTimeout <= 0:
			return errors.New("--http-read-timeout must be positive")
		case c.HTTPSessionIdle <= 0:
			return errors.New("--http-session-idle must be positive")
		case c.HTTPMaxSessions < 1:
			return errors.New("--http-max-sessions must be at least 1")
		}
	default:
		return fmt.Errorf("--transport %q: want stdio or http", c.Transport)
	}
	rg := c.RG
	if rg == "" {
		rg = "rg"
	}
	path, err := exec.LookPath(rg)
	if err != nil {
		return fmt.Errorf("ripgrep not found (%s): install it or pass --rg", rg)
	}
	if c.RG, err = filepath.Abs(path); err != nil {
		return err
	}
	if err := checkRG(c.RG); err != nil {
		return err
	}
	return c.Exec.check(c.Root, c.ReadOnly)
}

// httpFlags have a meaning only under --transport http; given under
// stdio they would be ignored, so they are refused.
var httpFlags = []string{"listen", "token-file", "allow-origin", "allow-remote",
	"http-read-timeout", "http-session-idle", "http-max-sessions"}

// maxToolNameLen and toolNameChars are the MCP specification's rule for
// tool names (2025-11-25, "Tool names"): 1 to 128 characters of A-Z, a-z,
// 0-9, underscore, hyphen and dot.
const maxToolNameLen = 128

var toolNameChars = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)

// checkToolsPrefix refuses a prefix that would make a tool name MCP does
// not allow.
func checkToolsPrefix(prefix string) error {
	if !toolNameChars.MatchString(prefix) {
		return fmt.Errorf("--tools-prefix %q: tool names may hold only letters, digits, _, - and .", prefix)
	}
	longest := ""
	for _, t := range allTools() {
		if len(t.name) > len(longest) {
			longest = t.name
		}
	}
	if n := len(prefix) + len(longest); n > maxToolNameLen {
		return fmt.Errorf("--tools-prefix is %d bytes: with it, %s would be %d characters, more than the %d MCP allows",
			len(prefix), longest, n, maxToolNameLen)
	}
	return nil
}

// checkBroadRoot refuses to serve the whole filesystem or the user's home
// directory itself, unless asked to: either hands the client every key,
// token and configuration file the user has.
func (c *Config) checkBroadRoot() error {
	if c.AllowBroadRoot {
		return nil
	}
	fi, err := os.Stat(c.Root)
	if err != nil {
		return nil // check reports it
	}
	if sys, err := os.Stat("/"); err == nil && os.SameFile(fi, sys) {
		return fmt.Errorf("--root %s is the whole filesystem: the client could read and change every file this user can; serve a project directory, or pass --allow-broad-root", c.Root)
	}
	if home, err := os.UserHomeDir(); err == nil {
		if h, err := os.Stat(home); err == nil && os.SameFile(fi, h) {
			return fmt.Errorf("--root %s is your home directory: the client could read your keys and tokens and change your shell and tool configuration; serve a project directory, or pass --allow-broad-root", c.Root)
		}
	}
	return nil
}

// minRG is the oldest ripgrep fsmcp is tested with (Debian 12's), whose
// --json events and exit codes the worker parses.
var minRG = [3]int{13, 0, 0}

var rgVersionLine = regexp.MustCompile(`^ripgrep (\d+)\.(\d+)\.(\d+)`)

// checkRG runs rg --version and refuses a program that does not answer as
// ripgrep minRG or newer: a stand-in that exits 0 would make every search
// succeed with nothing found.
func checkRG(rg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, rg, "--version").Output()
	if err != nil {
		return fmt.Errorf("--rg %s: running it with --version failed: %v", rg, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	m := rgVersionLine.FindStringSubmatch(first)
	if m == nil {
		return fmt.Errorf("--rg %s does not answer --version as ripgrep (it said %.80q)", rg, first)
	}
	var got [3]int
	for i := range got {
		got[i], _ = strconv.Atoi(m[i+1])
	}
	if slices.Compare(got[:], minRG[:]) < 0 {
		return fmt.Errorf("--rg %s is ripgrep %d.%d.%d; fsmcp needs %d.%d.%d or newer", rg, got[0], got[1], got[2], minRG[0], minRG[1], minRG[2])
	}
	return nil
}

// maxCallsLimit is the worker's bound on concurrent gRPC streams: more
// calls would only queue inside gRPC.
const maxCallsLimit = link.MaxStreams

// maxResponseBytesLimit keeps a page well inside one gRPC message.
const maxResponseBytesLimit = 64 << 20
