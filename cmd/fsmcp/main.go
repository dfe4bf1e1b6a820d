// Command fsmcp serves one directory to an MCP client as a rooted
// filesystem. The same binary, started with a hidden first argument, is
// the confined worker that alone touches the directory, the command
// runner, a command's shim, the rules reader and the cgroup reaper.
// `fsmcp exec [flags] -- ARGV` runs one command as fs_exec would.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/fsmcp/fsmcp/frontend"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/fsmcp/fsmcp/worker"
	"github.com/fsmcp/fsmcp/worker/command"
	"github.com/fsmcp/fsmcp/worker/rulesfile"
)

func main() {
	if code, ok := subcommand(os.Args, worker.Hooks{}); ok {
		os.Exit(code)
	}
	os.Exit(serve(os.Args[1:], frontend.Hooks{}))
}

// subcommand runs the subcommand args[1] names (a hidden one, or
// `fsmcp exec`), before any flag parsing, and says whether there was
// one. main and the tests' TestMain
// both dispatch through it.
func subcommand(args []string, hooks worker.Hooks) (code int, ok bool) {
	if len(args) < 2 {
		return 0, false
	}
	rest := args[2:]
	switch args[1] {
	case sandbox.WorkerSubcommand:
		return worker.Main(rest, hooks), true
	case sandbox.ExecSubcommand:
		return command.Main(rest), true
	case sandbox.CommandSubcommand:
		return sandbox.CommandMain(rest), true
	case sandbox.RulesSubcommand:
		return rulesfile.ReaderMain(rest), true
	case sandbox.ReaperSubcommand:
		return sandbox.ReaperMain(rest), true
	case frontend.ExecCommand:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return frontend.ExecMain(ctx, rest, os.Stdout, os.Stderr), true
	}
	return 0, false
}

// serve runs the front-end until the client goes or a signal ends it.
func serve(args []string, hooks frontend.Hooks) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return frontend.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr, hooks)
}
