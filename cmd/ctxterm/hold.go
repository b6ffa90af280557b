package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// HoldTimeout bounds the wait for the daemon's release (U2): a daemon that
// died before releasing leaves nothing waiting for ever.
const HoldTimeout = 30 * time.Second

// holdOnFD reads one byte from descriptor fd (the read end of the built-in
// launcher's pipe), then closes it. EOF means the daemon went away without
// registering the launch root: fail closed.
func holdOnFD(fd int, timeout time.Duration) error {
	defer unix.Close(fd)
	return waitOne(fd, timeout, fmt.Sprintf("hold descriptor %d", fd))
}

// holdOnFIFO reads one byte from the FIFO at path (the systemd launcher's,
// in the runtime directory).
func holdOnFIFO(path string, timeout time.Duration) error {
	fd, err := openFIFO(path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return waitOne(fd, timeout, "hold FIFO "+path)
}

// openFIFO opens the FIFO at path for reading. It must be ours: a FIFO
// owned by our uid, opened without following a symlink. Opening it
// non-blocking does not wait for a writer; poll does (a FIFO that never
// had a writer is not at EOF for poll), and a writer that closes without
// writing is EOF.
func openFIFO(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, fmt.Errorf("hold FIFO: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("hold FIFO %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO || int(st.Uid) != os.Getuid() {
		unix.Close(fd)
		return -1, fmt.Errorf("hold FIFO %s: not a FIFO of uid %d", path, os.Getuid())
	}
	return fd, nil
}

// waitOne reads one byte from fd within timeout.
func waitOne(fd int, timeout time.Duration, what string) error {
	if err := waitReadable(fd, timeout); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return readOne(fd, what)
}

// errHoldTimeout: nobody released the hold in time.
var errHoldTimeout = errors.New("not released in time")

func waitReadable(fd int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errHoldTimeout
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(min(left, time.Second).Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil // readable, or hung up: read tells
		}
	}
}

func readOne(fd int, what string) error {
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n == 0 {
			return fmt.Errorf("%s: closed without a release (the daemon went away, or refused the start)", what)
		}
		return nil
	}
}
