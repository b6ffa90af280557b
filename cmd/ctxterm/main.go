// Command ctxterm owns a pseudo-terminal running one program and serves it
// to watch (read-only) and attach (read-write) clients on a unix socket
// (runtime.md T2; wire protocol in ctxterm/PROTOCOL.md).
//
//	ctxterm --listen SOCKET [--events FILE] [--seccomp] -- CMD [ARGS...]
//
// It exits with the program's exit status (128+N if killed by signal N), or
// 125 if ctxterm itself could not start, 2 on a usage error. SIGTERM, SIGHUP
// and SIGINT hang up the PTY (SIGHUP to the program's process group, SIGKILL
// after a grace period). The socket is removed on exit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/cortexfs/ctx/ctxterm"
	"github.com/cortexfs/ctx/internal/seccomp"
	"github.com/cortexfs/ctx/internal/termres"
)

const exitSetup = 125

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ctxterm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "unix socket to serve the terminal on (required)")
	events := fs.String("events", "", "append terminal events as JSON lines to this file")
	filter := fs.Bool("seccomp", false, "put ctxterm and the program under ctx's seccomp filter before starting it")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ctxterm --listen SOCKET [--events FILE] [--seccomp] -- CMD [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *listen == "" || len(argv) == 0 {
		fs.Usage()
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "ctxterm")
	if *filter {
		// issue 11: the terminal's shell and all it runs get the filter every
		// sandbox gets (no TIOCSTI into this terminal, no ptrace of ctxterm);
		// under systemd no descriptor can carry it to bwrap, so it is
		// installed here, inside the sandbox, before the shell starts.
		if err := seccomp.InstallSelf(); err != nil {
			log.Error("start", "err", err)
			return exitSetup
		}
	}
	cfg := ctxterm.Config{Socket: *listen, Argv: argv, Logger: log}
	if *events != "" {
		cfg.Events = recorder(*events, log)
	}
	srv, err := ctxterm.New(cfg)
	if err != nil {
		log.Error("start", "err", err)
		if errors.Is(err, ctxterm.ErrInUse) {
			fmt.Fprintf(stderr, "ctxterm: %s is served by a live ctxterm\n", *listen)
		}
		return exitSetup
	}
	status, err := srv.Serve(ctx)
	if err != nil {
		log.Error("serve", "err", err)
		return exitSetup
	}
	if status < 0 || status > 255 {
		status = 255
	}
	return status
}

// recorder appends each event to the terminal resource's events file
// (runtime.md T5), synchronously, so the exited line is durable before exit.
func recorder(path string, log *slog.Logger) func(ctxterm.Event) {
	return func(e ctxterm.Event) {
		ev := termres.Event{Type: string(e.Type), TS: e.Time.UTC(), Mode: string(e.Mode), PID: e.PID, Cols: e.Cols, Rows: e.Rows, Reason: e.Reason}
		switch e.Type {
		case ctxterm.EventExited:
			ev.Status = termres.Int(e.Status)
		default:
			ev.UID = termres.Int(e.UID)
		}
		if err := termres.AppendFile(path, ev); err != nil {
			log.Warn("record event", "type", e.Type, "err", err)
		}
	}
}
