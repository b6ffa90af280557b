package supervisor

import (
	"context"
	"log/slog"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Talking to systemd happens only here, at the edges of Daemon.Run (STYLE
// habit 7): READY once the sockets are bound, STOPPING when shutdown
// begins, WATCHDOG while the daemon runs. Without NOTIFY_SOCKET (not under
// systemd, or Type=simple) every call is a no-op: SdNotify returning
// (false, nil) means "not under systemd", not an error.

// notifyReady tells systemd the daemon is ready (Type=notify). Call it after
// the system and control sockets are bound and the root actor runs.
func notifyReady(log *slog.Logger) {
	sent, err := sd.SdNotify(false, sd.SdNotifyReady)
	switch {
	case err != nil:
		log.Warn("systemd notify READY", "err", err)
	case sent:
		log.Info("told systemd we are ready")
	}
}

// notifyStopping tells systemd shutdown has begun, so it waits for the exit
// (TimeoutStopSec) instead of treating it as a crash.
func notifyStopping() {
	_, _ = sd.SdNotify(false, sd.SdNotifyStopping)
}

// runWatchdog pings the watchdog at half of WatchdogSec until ctx is done.
// It returns at once when the watchdog is off (or this is not systemd's
// main pid). Run it in its own goroutine; it owns its ticker.
func runWatchdog(ctx context.Context) {
	interval, err := sd.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = sd.SdNotify(false, sd.SdNotifyWatchdog)
		}
	}
}
