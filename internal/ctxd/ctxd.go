// Package ctxd holds the commands of the ctxd binary: the daemon itself and
// the doctor that needs the daemon's own probes (D-Bus, cgroups). `ctx
// daemon` and `ctx doctor` exec ctxd, so the ctx client links none of the
// actor runtime, metrics or D-Bus.
package ctxd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/coreos/go-systemd/v22/activation"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/doctor"
	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/fdhygiene"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/reaper"
	"github.com/cortexfs/ctx/supervisor"
)

// Exit codes, the same as ctx's: the one table (internal/exitcode).
const (
	ExitOK       = exitcode.OK
	ExitRunError = exitcode.RunError
	ExitUsage    = exitcode.Usage
)

// ExitError carries an exit code.
type ExitError = exitcode.Error

// CodeOf maps an error to ctxd's exit status.
func CodeOf(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, layout.ErrBadName):
		return ExitUsage
	}
	return ExitRunError
}

// Daemon runs the daemon in the foreground until ctx is cancelled (SIGTERM,
// SIGINT). Socket activation: the first unix listener of LISTEN_FDS is the
// system socket.
func Daemon(ctx context.Context, l layout.Layout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Nothing the daemon inherited (a client's terminal or
	// files, handed on by auto-start or a shell) reaches a sandbox; only
	// systemd's socket-activation descriptors are kept (NOTIFY_SOCKET is a
	// path, not a descriptor).
	closed, err := fdhygiene.CloseInherited(fdhygiene.KeepListenFDs())
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if len(closed) > 0 {
		log.Info("closed inherited descriptors", "fds", closed)
	}
	settings, err := config.FromEnv(l)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	found, procs := setDaemonProcs(os.Getenv("GOMAXPROCS"))
	log.Info("go procs", "gomaxprocs", procs, "found", found, "env", os.Getenv("GOMAXPROCS"))
	// The reaper is this very binary (the daemon is always ctxd: `ctx
	// daemon` execs it), read through /proc/self/exe at its start.
	d := &supervisor.Daemon{Settings: settings, Log: log, Fault: faultHook(), BinDir: selfDir(),
		Reaper: []string{"/proc/self/exe", reaper.Command}, ReaperLog: os.Stderr}
	if ls, err := activation.Listeners(); err == nil {
		for _, l := range ls {
			if ul, ok := l.(*net.UnixListener); ok {
				d.Listener = ul
				break
			}
		}
	}
	if err := d.Run(ctx); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return nil
}

// Doctor prints every check (as JSON with asJSON) and fails when one fails.
func Doctor(ctx context.Context, l layout.Layout, stdout io.Writer, asJSON bool) error {
	e := doctor.System(l, config.Version)
	e.SystemdPing = systemdPing
	r := doctor.Run(ctx, e)
	var err error
	if asJSON {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if n := r.Count(doctor.Fail); n > 0 {
		return &ExitError{Code: ExitRunError, Err: fmt.Errorf("doctor: %d check(s) failed", n)}
	}
	return nil
}

// systemdPing asks the user manager the way the daemon's launcher picks
// it (supervisor.NewSystemdLauncher): go-systemd over D-Bus
// (NewUserConnectionContext) first, then systemctl --user.
func systemdPing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	m, err := supervisor.NewDBusManager(ctx)
	if err == nil {
		defer m.Close()
		if err = m.Ping(ctx); err == nil {
			return nil
		}
	}
	sc, serr := supervisor.NewSystemctl()
	if serr != nil {
		return err
	}
	return sc.Ping(ctx)
}

func selfDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Dir(exe)
}
