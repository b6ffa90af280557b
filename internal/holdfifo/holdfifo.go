// Package holdfifo is the daemon's side of a FIFO a terminal's ctxterm
// waits on: the systemd launcher's hold (ctxterm --hold: nothing starts
// before the launch root is registered, U2 — the manager cannot hand a
// unit a descriptor) and the view hold (ctxterm --view-hold: the shell
// runs only once its view was checked, B1). The FIFO lives in the runtime
// directory, owner-only, never in a sandbox's view.
package holdfifo

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Make creates the FIFO at path, mode 0600, replacing a stale one.
func Make(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hold FIFO: %w", err)
	}
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return fmt.Errorf("hold FIFO %s: %w", path, err)
	}
	return nil
}

// Release writes the one byte that lets the ctxterm waiting on the FIFO
// at path go on. It waits until a reader has the FIFO open (a
// non-blocking open for writing fails with ENXIO before), giving up when
// alive reports the process gone or after timeout.
func Release(path string, alive func() bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err == nil {
			var st unix.Stat_t
			if ferr := unix.Fstat(fd, &st); ferr != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
				unix.Close(fd)
				return fmt.Errorf("release %s: not a FIFO (%v)", path, ferr)
			}
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
