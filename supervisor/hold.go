package supervisor

import (
	"errors"
	"fmt"
	"os"
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
