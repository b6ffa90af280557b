package ctxterm

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fanoutServer is a Server with only its fan-out state: no PTY, no socket.
func fanoutServer(queue, scrollback int) *Server {
	return &Server{cfg: Config{ClientQueue: queue}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ring: newRing(scrollback), clients: map[*client]struct{}{}, room: make(chan struct{}, 1)}
}

// pairConn is one end of a connected unix socket pair (the other is closed
// with the test).
func pairConn(t *testing.T) *net.UnixConn {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { conns[i].Close() })
	}
	return conns[0]
}

func newTestClient(t *testing.T, s *Server) *client {
	c := &client{conn: pairConn(t), mode: ModeWatch, wake: make(chan struct{}, 1)}
	s.clients[c] = struct{}{}
	return c
}

// TestFanoutBroadcast: every chunk goes to the scrollback ring and to every
// client's queue, shared (not copied); the ring keeps only the newest bytes.
// spec: T2 (the fan-out tested without a PTY)
func TestFanoutBroadcast(t *testing.T) {
	s := fanoutServer(1<<10, 8)
	a, b := newTestClient(t, s), newTestClient(t, s)
	s.broadcast([]byte("hello "))
	s.broadcast([]byte("world"))
	if got := string(s.ring.Snapshot()); got != "lo world" {
		t.Errorf("ring %q", got)
	}
	for _, c := range []*client{a, b} {
		q, _, failure, gone := c.take()
		if string(bytes.Join(q, nil)) != "hello world" || failure != "" || gone {
			t.Errorf("queue %q failure %q gone %v", bytes.Join(q, nil), failure, gone)
		}
		if n, live := c.queued(); n != 0 || !live {
			t.Errorf("after take: %d %v", n, live)
		}
	}
}

// TestFanoutSlowClientDropped: a client whose queue would pass the bound is
// dropped with a reason, at once; the others keep receiving; nobody waits.
// spec: T2
func TestFanoutSlowClientDropped(t *testing.T) {
	s := fanoutServer(10, 64)
	fast, slow := newTestClient(t, s), newTestClient(t, s)
	s.broadcast([]byte("0123456"))
	fast.take()
	s.broadcast([]byte("789ab")) // slow now holds 12 > 10 bytes
	if _, live := slow.queued(); live {
		t.Fatal("the slow client still takes output")
	}
	if r := slow.reason(); !strings.Contains(r, "too slow") {
		t.Errorf("reason %q", r)
	}
	q, _, failure, _ := fast.take()
	if string(bytes.Join(q, nil)) != "789ab" || failure != "" {
		t.Errorf("fast client: %q %q", bytes.Join(q, nil), failure)
	}
}

// TestFanoutPacedByFastest: the PTY reader waits while the fastest client
// has more than half its queue in use, and goes on as soon as that client
// takes its output — without dropping it (a drop after stallTimeout would
// also end the wait, so the test checks the client is still live).
// spec: T2
func TestFanoutPacedByFastest(t *testing.T) {
	s := fanoutServer(10, 64)
	c := newTestClient(t, s)
	s.broadcast([]byte("12345678")) // 8 > 10/2
	done := make(chan struct{})
	go func() {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		s.waitRoom(timer)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("the reader went on while the only client was over half full")
	case <-time.After(50 * time.Millisecond):
	}
	c.take()
	s.signalRoom()
	<-done
	if _, live := c.queued(); !live {
		t.Errorf("the client was dropped: %s", c.reason())
	}
}
