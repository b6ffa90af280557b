// Command ctxd is the CortexFS agent runtime's daemon. Users start it as
// `ctx daemon` (which execs it, keeping the pid, the descriptors of socket
// activation and the environment) or let a client auto-start it.
//
//	ctxd [daemon]          run the daemon in the foreground
//	ctxd doctor [--json]   the checks of `ctx doctor`
//	ctxd mcp-tools NAME [--agent A]   `ctx mcp tools` (it starts a sandbox)
//	ctxd reap ROOT UID     the daemon's reaper (internal/reaper), started by the daemon
//	ctxd provider add|list|test …   `ctx provider` (ctxd links the provider code)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cortexfs/ctx/internal/ctxd"
	"github.com/cortexfs/ctx/internal/egress"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/reaper"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == egress.HelperArg {
		// Not for users: the daemon runs it inside a net sandbox's network
		// namespace (internal/egress), before the sandbox runs.
		return egress.Helper(args[1:])
	}
	l := layout.FromEnv()
	var err error
	switch {
	case len(args) == 0 || len(args) == 1 && args[0] == "daemon":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		err = ctxd.Daemon(ctx, l, os.Stderr)
	case args[0] == "doctor" && (len(args) == 1 || len(args) == 2 && args[1] == "--json"):
		err = ctxd.Doctor(context.Background(), l, os.Stdout, len(args) == 2)
	case args[0] == "mcp-tools" && (len(args) == 2 || len(args) == 4 && args[2] == "--agent"):
		agent := ""
		if len(args) == 4 {
			agent = args[3]
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		err = ctxd.MCPTools(ctx, l, args[1], agent, os.Stdout, os.Stderr)
	case args[0] == "provider":
		var p ctxd.ProviderArgs
		if p, err = ctxd.ParseProviderArgs(args[1:]); err == nil {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			err = ctxd.Provider(ctx, l, p, os.Stdin, os.Stdout, os.Stderr)
		} else {
			err = &ctxd.ExitError{Code: ctxd.ExitUsage, Err: err}
		}
	case args[0] == reaper.Command:
		err = reaper.Run(args[1:], os.NewFile(3, "daemon"), os.Stderr)
	default:
		fmt.Fprintln(os.Stderr, "usage: ctxd [daemon] | ctxd doctor [--json] | ctxd mcp-tools NAME [--agent A] | ctxd reap ROOT UID   (users run `ctx daemon`, `ctx doctor`, `ctx mcp tools`)")
		return ctxd.ExitUsage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctx:", err)
	}
	return ctxd.CodeOf(err)
}
