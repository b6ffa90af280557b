package ctxterm

// The PTY side: starting the program on its PTY, sizing it, reading it
// (paced by the fastest client), writing input to it.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// start opens the PTY and starts the program on it. It does what pty.Start
// does (Setsid + Setctty, so job control and ^C work) but sets the initial
// size through SyscallConn: pty.Setsize calls Fd(), which would make the
// master blocking and stop Close from waking its reader.
func (s *Server) start() error {
	ptm, tty, err := pty.Open()
	if err != nil {
		return fmt.Errorf("ctxterm: open pty: %w", err)
	}
	defer tty.Close()
	if ptm, err = pollable(ptm); err != nil {
		return err
	}
	if err := setSize(ptm, s.cols, s.rows); err != nil {
		ptm.Close()
		return err
	}
	cmd := exec.Command(s.cfg.Argv[0], s.cfg.Argv[1:]...)
	cmd.Dir = s.cfg.Dir
	cmd.Env = s.cfg.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.ExtraFiles = s.cfg.ExtraFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		ptm.Close()
		return fmt.Errorf("ctxterm: start %q: %w", s.cfg.Argv[0], err)
	}
	s.ptm, s.cmd = ptm, cmd
	return nil
}

// pollable returns the master as a file Go's poller waits on, so that
// Close wakes its reader: pty.Open hands it over blocking (it calls Fd()
// itself), and a read blocked in the kernel outlives Close for as long as
// any process holds the slave open — a program's orphan, a held sandbox
// process whose bwrap died — which kept Serve from ever returning. f is
// closed.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("ctxterm: pty master: %w", err)
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("ctxterm: pty master: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("ctxterm: pty master: %w", derr)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, fmt.Errorf("ctxterm: pty master: %w", err)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil // non-blocking: registered with the poller
}

func setSize(f *os.File, cols, rows int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("ctxterm: resize: %w", err)
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	if err == nil {
		err = ierr
	}
	if err != nil {
		return fmt.Errorf("ctxterm: resize %dx%d: %w", cols, rows, err)
	}
	return nil
}

// readPTY is the only reader of the master. Each read becomes an immutable
// chunk shared by the ring and every client queue.
//
// Flow control: before each read it waits until the fastest client has at
// most half its queue in use (the program is paced by its fastest viewer,
// as by a real terminal), but never longer than stallTimeout: then everyone
// still behind is dropped. A client whose queue overflows while another keeps
// up is dropped at once (broadcast).
func (s *Server) readPTY() {
	buf := make([]byte, readBufSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		s.waitRoom(timer)
		n, err := s.ptm.Read(buf)
		if n > 0 {
			s.broadcast(bytes.Clone(buf[:n]))
		}
		if err != nil {
			// EIO once the slave side is gone is the PTY's EOF.
			if !errors.Is(err, syscall.EIO) && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.log.Warn("pty read", "err", err)
			}
			return
		}
	}
}

func (s *Server) waitRoom(timer *time.Timer) {
	half := s.cfg.ClientQueue / 2
	var deadline time.Time
	for {
		s.mu.Lock()
		ok, behind := true, []*client(nil)
		for c := range s.clients {
			q, live := c.queued()
			if !live {
				continue
			}
			if q <= half {
				ok = true
				break
			}
			ok = false
			behind = append(behind, c)
		}
		s.mu.Unlock()
		if ok {
			return
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(stallTimeout)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			for _, c := range behind {
				s.dropSlow(c, fmt.Sprintf("dropped: too slow, output stalled for %v", stallTimeout))
			}
			return
		}
		timer.Reset(wait)
		select {
		case <-s.room:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (s *Server) input(p []byte) {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	if _, err := s.ptm.Write(p); err != nil && !errors.Is(err, os.ErrClosed) {
		s.log.Warn("pty write", "err", err)
	}
}

func (s *Server) resize(c *client, cols, rows int) {
	if err := setSize(s.ptm, cols, rows); err != nil {
		s.log.Warn("resize", "err", err)
		return
	}
	s.mu.Lock()
	s.cols, s.rows = cols, rows
	s.mu.Unlock()
	s.emit(Event{Type: EventResized, Mode: c.mode, PID: c.pid, UID: c.uid, Cols: cols, Rows: rows})
}
