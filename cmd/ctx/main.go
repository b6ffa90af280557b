// Command ctx is the CortexFS agent runtime's CLI and daemon.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/cortexfs/ctx/internal/cli"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/version"
)

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) == 2 && os.Args[1] == "daemon" {
		// `ctx daemon` becomes ctxd before the CLI's model is built: the
		// daemon is ready as soon as ctxd alone would be.
		return cli.ExecDaemon()
	}
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-V") {
		// What kong's VersionFlag prints, without building the model.
		fmt.Println("ctx " + version.Version)
		return 0
	}
	if bakedHelpServes(os.Args[1:], helpWidth(os.Stdout)) {
		os.Stdout.WriteString(bakedHelp)
		return 0
	}
	parser, err := newParser(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctx:", err)
		return cli.ExitUsage
	}
	kctx, err := parser.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctx:", err)
		return cli.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if kctx.Command() != "daemon" {
		// Only the daemon shuts down on SIGINT/SIGTERM by context; clients handle SIGINT themselves.
		stop()
		ctx = context.Background()
	}
	env := &cli.Env{Ctx: ctx, Layout: layout.FromEnv(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := kctx.Run(env); err != nil {
		code := cli.CodeOf(err)
		if msg := err.Error(); msg != "" && !isSilent(err) {
			fmt.Fprintln(os.Stderr, "ctx:", msg)
		}
		return code
	}
	return 0
}

// newParser is the CLI's kong parser for args. Kong builds the model of
// only the command args name (cli.Grammar). Help is wrapped at the
// terminal's width up to helpWrap columns.
func newParser(args []string, opts ...kong.Option) (*kong.Kong, error) {
	return kong.New(cli.Grammar(args), append([]kong.Option{kong.Name("ctx"),
		kong.Description("CortexFS agent runtime: durable sessions, sandboxed tools, a terminal into the agent's shell."),
		kong.UsageOnError(), kong.Vars{"version": "ctx " + version.Version},
		kong.ConfigureHelp(kong.HelpOptions{WrapUpperBound: helpWrap})}, opts...)...)
}

func isSilent(err error) bool {
	var ee *cli.ExitError
	return errors.As(err, &ee) && ee.Err == nil // kong wraps Run's error
}
