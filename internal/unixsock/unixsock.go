// Package unixsock is the one copy of unix-socket hygiene
// 1): listen in a private directory (dial first, refuse a live server,
// remove a stale file, 0600 before the first accept, the process umask
// untouched) and the kernel's peer credentials.
package unixsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse means another live process serves the socket path.
var ErrInUse = errors.New("socket in use by a live process")

// DialProbe bounds the dial that tells a live server from a stale file.
const DialProbe = time.Second

// Listen binds a unix socket at path, mode 0600, in its directory (created
// 0700 with its parents when missing). A live server at path is refused
// with ErrInUse; a stale socket file is removed; anything else at path is
// refused. The socket is unlinked when the listener closes.
//
// The umask is not changed: it is process-wide, and a directory another
// goroutine made meanwhile came out 0600 (untraversable). The socket is
// born in the 0700 directory and made 0600 before it accepts; every peer's
// uid is checked anyway (A4).
func Listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("listen %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, DialProbe); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: %w", path, ErrInUse)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("listen %s: remove stale socket: %w", path, err)
		}
	}
	// The file is made 0600 by bind itself: Linux gives a socket's file
	// the mode of its inode (less the umask), set here before the bind,
	// so no one ever sees it with the umask's mode (chmod after the
	// bind, kept below for other systems, leaves a window).
	l, err := ownerOnly.Listen(context.Background(), "unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ln := l.(*net.UnixListener)
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: chmod: %w", path, err)
	}
	return ln, nil
}

// ownerOnly binds sockets whose file is 0600 from the start (Linux: the
// mode of the socket's inode, set before the bind). Where a socket's
// mode cannot be set so, the chmod after the bind still makes it 0600.
var ownerOnly = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) { _ = unix.Fchmod(int(fd), 0o600) })
}}

// PeerCred returns the kernel's credentials (SO_PEERCRED) of the process at
// the other end of c. Call it before the first byte from c is parsed.
func PeerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("peer credentials: SO_PEERCRED: %w", cerr)
	}
	return cred, nil
}
