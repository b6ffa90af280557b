package supervisor

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// holdTimeout bounds how long the daemon tries to release a started
// terminal (the FIFO reader appears once the unit's ctxterm runs).
const holdTimeout = 10 * time.Second

// makeHoldFIFO creates the FIFO a systemd unit's ctxterm waits on
// (--hold): mode 0600 in the runtime directory, a stale one replaced.
func makeHoldFIFO(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hold FIFO: %w", err)
	}
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return fmt.Errorf("hold FIFO %s: %w", path, err)
	}
	return nil
}

// releaseHoldFIFO writes the one byte that lets the ctxterm waiting on the
// FIFO at path start its sandbox (spec: U2 — after the launch root is
// registered). It waits until a reader has the FIFO open (a non-blocking
// open for writing fails with ENXIO before), giving up when alive reports
// the process gone or after timeout.
func releaseHoldFIFO(path string, alive func() bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err == nil {
			_, werr := unix.Write(fd, []byte{'\n'})
			unix.Close(fd)
			if werr != nil {
				return fmt.Errorf("release %s: %w", path, werr)
			}
			return nil
		}
		if !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("release %s: %w", path, err)
		}
		if !alive() {
			return fmt.Errorf("release %s: the terminal exited before it waited for its release", path)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("release %s: no reader within %v", path, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeEnvFile writes env (K=V) as a systemd EnvironmentFile at path,
// owner-only (0600), replacing what is there: the terminal's environment
// reaches its unit through it, never through ExecStart or systemd-run's
// command line, which every local user reads. A value systemd would
// rewrite (quotes, backslashes, a line break, a leading space) is refused.
// spec: B3
func writeEnvFile(path string, env []string) error {
	var b strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.ContainsAny(kv, "\"'\\\n\r") || strings.TrimSpace(v) != v || k == "" {
			return fmt.Errorf("environment file: %s: a value systemd would not keep as it is", k)
		}
		b.WriteString(kv + "\n")
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("environment file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("environment file: %w", err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("environment file %s: %w", path, err)
	}
	return nil
}
