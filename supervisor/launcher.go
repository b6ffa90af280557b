package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/internal/launchroot"
	"golang.org/x/sys/unix"
)

// Launcher names (terminal.Receipt.Launcher).
const (
	LauncherSystemd = "systemd"
	LauncherBuiltin = "builtin"
)

// SelectLauncher picks the terminal launcher: CTX_LAUNCHER=builtin|systemd
// forces one (systemd fails when no user manager answers); otherwise
// systemd when a user manager answers on D-Bus, else the built-in one.
func SelectLauncher(ctx context.Context, roots *launchroot.Registry, log *slog.Logger) (terminal.Launcher, error) {
	want := os.Getenv("CTX_LAUNCHER")
	switch want {
	case "", "auto", LauncherSystemd:
		sd, err := NewSystemdLauncher(ctx, roots, log)
		if err == nil {
			return sd, nil
		}
		if want == LauncherSystemd {
			return nil, fmt.Errorf("CTX_LAUNCHER=systemd: %w", err)
		}
		log.Info("no systemd user manager answers; terminals use the built-in launcher", "why", err)
		return NewBuiltinLauncher(roots, log), nil
	case LauncherBuiltin:
		return NewBuiltinLauncher(roots, log), nil
	}
	return nil, fmt.Errorf("CTX_LAUNCHER=%q: want auto, systemd or builtin", want)
}

// waitPID waits, without being its parent, until the process of r is gone:
// a pidfd becomes readable when it exits. It polls ctx every 250 ms.
func waitPID(ctx context.Context, r terminal.Receipt) error {
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return nil // already gone (ESRCH)
	}
	defer unix.Close(fd)
	if !terminal.Alive(r) { // the pid is pinned now: check it is still ours
		return nil
	}
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 250)
		if n > 0 {
			return nil
		}
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("wait pid %d: %w", r.PID, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// signalPinned sends sig to the process of r only if it still is that
// process (pidfd, then the start time): never to a reused pid.
func signalPinned(r terminal.Receipt, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return terminal.ErrGone
	}
	defer unix.Close(fd)
	if !terminal.Alive(r) {
		return terminal.ErrGone
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// closer is a launcher with work of its own to finish when the daemon stops.
type closer interface {
	Close(ctx context.Context) error
}

var (
	_ closer = (*BuiltinLauncher)(nil)
	_ closer = (*SystemdLauncher)(nil)
)

// stopGrace is how long a hung-up terminal gets before SIGKILL: the
// daemon's grace plus ctxterm's own 2 s hang-up grace.
func stopGrace(grace time.Duration) time.Duration { return grace + 3*time.Second }
