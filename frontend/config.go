package frontend

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Config is the parsed command line.
type Config struct {
	Root             string
	ReadOnly         bool
	MaxResponseBytes int64
	Transport        string
	Listen           string
	TokenFile        string
	AllowRemote      bool
	AllowOrigins     []string
	AuditLog         string
	ToolsPrefix      string
	RG               string
	AllowNoLandlock  bool
	CallTimeout      time.Duration
	MaxCalls         int
	MaxSessionCalls  int
	// Ask names the tools, or classes of tools, that wait for the
	// person's approval (--ask).
	Ask      []string
	ToolHelp bool
	Version  bool
	Help     bool
}

// defaultMaxResponseBytes bounds a reply where agent hosts still take it
// whole: they truncate or refuse tool results far below 256 KiB.
const defaultMaxResponseBytes = 64 << 10

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
	fs.StringVar(&c.AuditLog, "audit-log", "", "append the audit log (one JSON line per call) to this file instead of stderr")
	fs.StringVar(&c.ToolsPrefix, "tools-prefix", "", "prefix for every tool name")
	fs.StringVar(&c.RG, "rg", "", "ripgrep binary (default: rg on PATH)")
	fs.BoolVar(&c.AllowNoLandlock, "allow-no-landlock", false, "run on a kernel without Landlock, with only os.Root as containment")
	fs.DurationVar(&c.CallTimeout, "call-timeout", 60*time.Second, "deadline of one tool call")
	fs.Func("ask", "ask the person at the client (MCP elicitation) before calls of this tool, or of a class: writes, destructive, exec; repeatable", func(v string) error {
		c.Ask = append(c.Ask, v)
		return nil
	})
	fs.BoolVar(&c.ToolHelp, "tool-help", false, "print the tools and parameters the other flags would serve, and exit")
	fs.IntVar(&c.MaxCalls, "max-calls", defaultMaxCalls, "tool calls running at once on the server; more wait up to 10 s for a slot, then are answered unavailable")
	fs.IntVar(&c.MaxSessionCalls, "max-session-calls", defaultMaxSessionCalls, "tool calls running at once in one session (stdio, or one HTTP session)")
	fs.BoolVar(&c.Version, "version", false, "print the version and exit")
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
	return c, fs, nil
}

// checkTools validates the flags that decide which tools are served and
// how; --tool-help needs no more than these.
func (c *Config) checkTools() error {
	_, err := askedTools(c.Ask, c.ToolsPrefix, allTools())
	return err
}

// check validates the configuration and resolves --root and --rg. It runs
// before the front-end confines itself.
func (c *Config) check() error {
	if err := c.checkTools(); err != nil {
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
	if c.CallTimeout <= 0 {
		return errors.New("--call-timeout must be positive")
	}
	if c.MaxCalls < 1 || c.MaxCalls > maxCallsLimit {
		return fmt.Errorf("--max-calls must be between 1 and %d", maxCallsLimit)
	}
	if c.MaxSessionCalls < 1 || c.MaxSessionCalls > c.MaxCalls {
		return fmt.Errorf("--max-session-calls must be between 1 and --max-calls (%d)", c.MaxCalls)
	}
	switch c.Transport {
	case "stdio":
	case "http":
		if err := checkListen(c.Listen, c.AllowRemote); err != nil {
			return err
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
	return nil
}

// maxCallsLimit is the worker's bound on concurrent gRPC streams
// (worker.MaxStreams): more calls would only queue inside gRPC.
const maxCallsLimit = 256

// maxResponseBytesLimit keeps a page well inside one gRPC message.
const maxResponseBytesLimit = 64 << 20
