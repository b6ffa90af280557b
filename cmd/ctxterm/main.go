// Command ctxterm owns a pseudo-terminal running one program and serves it
// to watch (read-only) and attach (read-write) clients on a unix socket
// (runtime.md T2; wire protocol in ctxterm/PROTOCOL.md).
//
//	ctxterm --listen SOCKET [--events FILE] [--hold-fd N | --hold FIFO] [--sandboxed [--view-hold FIFO]] -- CMD [ARGS...]
//
// The terminal's ctxterm runs on the host, outside the sandbox: CMD is
// bwrap, and only the shell bwrap starts (and what it runs) is inside.
// --hold-fd and --hold make ctxterm wait, before it
// binds the socket or starts CMD, for one byte on descriptor N or from the
// FIFO: the daemon writes it once the launch root is registered (U2); an
// EOF, an error or no byte within HoldTimeout ends ctxterm (125) before
// anything started. --sandboxed says CMD is bwrap's argv, so ctxterm may
// hand bwrap the descriptors it opens itself (the seccomp filter).
// --view-hold (with --sandboxed) holds the sandboxed program once bwrap
// has made its view (bwrap --block-fd, latched: only a byte releases it)
// until one byte comes from the FIFO: the daemon writes it once it has
// checked that view (B1). An EOF, an error, no byte within HoldTimeout,
// a stop or bwrap's end kills everything below ctxterm (viewGate), and
// ctxterm ends (125) with nothing of the sandbox run.
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
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/fdhygiene"
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
	holdFD := fs.Int("hold-fd", 0, "read one byte from this descriptor before starting anything")
	holdFIFO := fs.String("hold", "", "read one byte from this FIFO before starting anything")
	sandboxed := fs.Bool("sandboxed", false, "CMD is bwrap: hand it ctxterm's own descriptors (seccomp filter)")
	viewHold := fs.String("view-hold", "", "with --sandboxed: hold the sandboxed program until one byte is read from this FIFO")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ctxterm --listen SOCKET [--events FILE] [--hold-fd N | --hold FIFO] [--sandboxed [--view-hold FIFO]] -- CMD [ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *listen == "" || len(argv) == 0 || *holdFD < 0 || (*holdFD > 0 && *holdFD < 3) || (*holdFD > 0 && *holdFIFO != "") || (*viewHold != "" && !*sandboxed) {
		fs.Usage()
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "ctxterm")
	// Nothing ctxterm inherited beyond its streams (and the hold
	// descriptor, closed once read) reaches the program.
	if closed, err := fdhygiene.CloseInherited(func(fd int) bool { return fd == *holdFD }); err != nil {
		log.Error("close inherited descriptors", "err", err)
		return exitSetup
	} else if len(closed) > 0 {
		log.Info("closed inherited descriptors", "fds", closed)
	}
	// spec: U2 — nothing runs before the daemon has registered the launch root.
	switch {
	case *holdFD > 0:
		if err := holdOnFD(*holdFD, HoldTimeout); err != nil {
			log.Error("hold", "err", err)
			return exitSetup
		}
	case *holdFIFO != "":
		if err := holdOnFIFO(*holdFIFO, HoldTimeout); err != nil {
			log.Error("hold", "err", err)
			return exitSetup
		}
	}
	cfg := ctxterm.Config{Socket: *listen, Argv: argv, Logger: log}
	var view *viewGate
	if *sandboxed {
		var err error
		// ctxterm's own environment is the sandbox's (the launcher set it);
		// bwrap gets it by descriptor and runs with none of its own. spec: B3
		cfg.Env = []string{}
		if cfg.Argv, cfg.ExtraFiles, err = sandboxArgv(argv, os.Environ()); err != nil {
			log.Error("sandbox", "err", err)
			return exitSetup
		}
		if *viewHold != "" {
			// spec: B1 — the shell runs only in a view the daemon checked.
			if view, err = newViewGate(*viewHold, log); err == nil {
				cfg.Argv, cfg.ExtraFiles, err = view.argv(cfg.Argv, cfg.ExtraFiles)
			}
			if err != nil {
				view.close()
				for _, f := range cfg.ExtraFiles {
					f.Close()
				}
				log.Error("view hold", "err", err)
				return exitSetup
			}
		}
	}
	if *events != "" {
		rec := recorder(*events, log)
		cfg.Events = func(e ctxterm.Event) {
			// A shell that was never released never ran: its sandbox's
			// end is no "exited" of the terminal (it would also read as
			// the end of a later, live generation). spec: T5
			if e.Type == ctxterm.EventExited && !view.wasReleased() {
				return
			}
			rec(e)
		}
	}
	srv, err := ctxterm.New(cfg)
	for _, f := range cfg.ExtraFiles {
		f.Close() // the program has its copies
	}
	if err != nil {
		view.close()
		log.Error("start", "err", err)
		if errors.Is(err, ctxterm.ErrInUse) {
			fmt.Fprintf(stderr, "ctxterm: %s is served by a live ctxterm\n", *listen)
		}
		return exitSetup
	}
	view.start(srv.PID(), HoldTimeout)
	if view != nil {
		// Told to stop while held: the held tree goes first (a hang-up
		// alone ends bwrap, not the process it holds).
		defer context.AfterFunc(ctx, func() { view.abort(errors.New("ctxterm told to stop")) })()
	}
	status, err := srv.Serve(ctx)
	refused := view.end()
	view.close()
	if err != nil {
		log.Error("serve", "err", err)
		return exitSetup
	}
	if refused {
		return exitSetup
	}
	if status < 0 || status > 255 {
		status = 255
	}
	return status
}

// seccompFile returns the seccomp BPF program every sandboxed process gets
// (TIOCSTI and TIOCLINUX refused, no ptrace, no namespaces …):
// ctxterm, on the host, hands it to the terminal's bwrap (--seccomp 3) —
// under systemd too, where no descriptor reaches the unit from the daemon.
// A filter that cannot be built fails the start (closed). Tests swap it.
var seccompFile = seccomp.File

// sandboxArgv adds to bwrap's argv (argv[0] is bwrap) the descriptors
// ctxterm hands it: the seccomp filter as descriptor 3 (--seccomp 3).
// Every bind source is then opened here without following a symlink in
// any component and handed over by descriptor (bwrap.BindByFD). env (K=V, the
// sandbox's environment) is handed over by descriptor too, right after
// bwrap's --clearenv (--args N): never on a command line. spec: B3
func sandboxArgv(argv, env []string) ([]string, []*os.File, error) {
	var files []*os.File
	out := argv
	if seccompFile != nil {
		f, err := seccompFile()
		if err != nil {
			return nil, nil, fmt.Errorf("seccomp filter: %w", err)
		}
		out = append([]string{argv[0], "--seccomp", "3"}, argv[1:]...) // ExtraFiles[0] is descriptor 3
		files = append(files, f)
	}
	out, files, err := bwrap.BindByFD(out, files)
	if err == nil {
		out, files, err = bwrap.PassEnvByFD(out, files, env)
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, err
	}
	return out, files, nil
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
