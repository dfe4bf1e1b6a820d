// Command fsmcp serves one directory to an MCP client as a rooted
// filesystem. The same binary, started with a hidden first argument, is
// the confined worker that alone touches the directory.
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
)

func main() {
	// The worker is dispatched before any flag parsing.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sandbox.WorkerSubcommand:
			os.Exit(worker.Main(os.Args[2:], worker.Hooks{}))
		case sandbox.ExecSubcommand:
			os.Exit(command.Main(os.Args[2:]))
		case sandbox.CommandSubcommand:
			os.Exit(sandbox.CommandMain(os.Args[2:]))
		case sandbox.RulesSubcommand:
			os.Exit(worker.RulesReaderMain(os.Args[2:]))
		case sandbox.ReaperSubcommand:
			os.Exit(sandbox.ReaperMain(os.Args[2:]))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := frontend.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, frontend.Hooks{})
	stop()
	os.Exit(code)
}
