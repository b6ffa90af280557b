package launchroot

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Peer is the kernel's word on who is at the other end of a unix socket:
// SO_PEERCRED, and a pidfd pinning that process so that a pid reused while
// we walk /proc cannot pass for it.
type Peer struct {
	PID, UID, GID int
	pidfd         int // -1 when neither SO_PEERPIDFD nor pidfd_open is available
}

// PeerOf reads SO_PEERCRED from conn and pins the peer: SO_PEERPIDFD where
// the kernel has it (6.5+), else pidfd_open(2) on the SO_PEERCRED pid.
// Call it before the first byte from conn is parsed. Close the Peer when
// done. spec: U2, A4
func PeerOf(conn *net.UnixConn) (*Peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("launchroot: peer: %w", err)
	}
	var (
		cred              *unix.Ucred
		pidfd             = -1
		credErr, pidfdErr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr != nil {
			return
		}
		pidfd, pidfdErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		if pidfdErr != nil {
			pidfd = -1
		}
	}); err != nil {
		return nil, fmt.Errorf("launchroot: peer: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("launchroot: peer: SO_PEERCRED: %w", credErr)
	}
	p := &Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid), pidfd: -1}
	switch {
	case pidfdErr == nil:
		p.pidfd = pidfd
	case errors.Is(pidfdErr, unix.ENOPROTOOPT) || errors.Is(pidfdErr, unix.EINVAL):
		// Older kernel: pin by pid now, as close to accept as we can.
		if p.PID > 0 {
			fd, err := unix.PidfdOpen(p.PID, 0)
			switch {
			case err == nil:
				p.pidfd = fd
			case errors.Is(err, unix.ESRCH):
				return p, fmt.Errorf("peer pid %d: %w", p.PID, ErrPeerGone)
			case errors.Is(err, unix.ENOSYS):
				// No pidfds at all: the start-time checks remain.
			default:
				return p, fmt.Errorf("launchroot: peer pid %d: pidfd_open: %w", p.PID, err)
			}
		}
	default:
		// SO_PEERPIDFD fails with ESRCH once the peer has been reaped.
		return p, fmt.Errorf("peer pid %d: SO_PEERPIDFD: %v: %w", p.PID, pidfdErr, ErrPeerGone)
	}
	return p, nil
}

// Alive says whether the pinned peer process still exists (signal 0 through
// its pidfd). Without a pidfd it returns nil.
func (p *Peer) Alive() error {
	if p.pidfd < 0 {
		return nil
	}
	if err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("peer pid %d: %v: %w", p.PID, err, ErrPeerGone)
	}
	return nil
}

// Pinned says whether the peer is held by a pidfd.
func (p *Peer) Pinned() bool { return p.pidfd >= 0 }

// Close releases the pidfd.
func (p *Peer) Close() error {
	if p == nil || p.pidfd < 0 {
		return nil
	}
	fd := p.pidfd
	p.pidfd = -1
	return unix.Close(fd)
}

// VerifyPeer is Verify for a pinned peer: after the walk the peer must still
// be alive, so the /proc entries read were its own and not a reused pid's.
// spec: U2
func (r *Registry) VerifyPeer(p *Peer) (Identity, error) {
	id, err := r.Verify(p.PID, p.UID)
	if err != nil {
		return Identity{}, err
	}
	if err := p.Alive(); err != nil {
		return Identity{}, err
	}
	return id, nil
}
