package ctxterm

// Fan-out: the scrollback ring and each client's bounded queue, fed by
// the PTY reader under Server.mu; a slow client is dropped, never waited
// for (spec: T2). Testable without a PTY (fanout_test.go).

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"time"
)

func (s *Server) dropSlow(c *client, reason string) {
	if reason != "" {
		c.fail(reason)
	}
	// A writer stuck on a full socket gets slowGrace to finish its batch
	// (then it sends the reason frame); after that its write fails and it
	// just closes.
	_ = c.conn.SetWriteDeadline(time.Now().Add(slowGrace))
	s.log.Warn("dropping slow client", "peer_pid", c.pid, "mode", c.mode, "reason", c.reason())
}

func (s *Server) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// broadcast records chunk in the scrollback and queues it for every client.
// spec: T2 — a client whose queue is full is dropped; nobody waits for it.
func (s *Server) broadcast(chunk []byte) {
	var slow []*client
	s.mu.Lock()
	s.ring.Write(chunk)
	for c := range s.clients {
		if !c.push(chunk, s.cfg.ClientQueue) {
			slow = append(slow, c)
		}
	}
	s.mu.Unlock()
	for _, c := range slow {
		s.dropSlow(c, "")
	}
}

// client is one connection's state shared by its reader, its writer and the
// PTY reader.
type client struct {
	conn  *net.UnixConn
	mode  Mode
	pid   int
	uid   int
	since time.Time
	wake  chan struct{} // capacity 1: "look at the state again"

	mu      sync.Mutex
	q       [][]byte
	spare   [][]byte
	qbytes  int
	exit    *int
	failure string // send an error frame with this reason, then close
	gone    bool   // the reader ended: close without a word
}

func (c *client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// push queues chunk; it reports false (and marks the client failed) when
// the queue would exceed limit bytes.
func (c *client) push(chunk []byte, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure != "" || c.gone {
		return true
	}
	if c.qbytes+len(chunk) > limit {
		c.failure = fmt.Sprintf("dropped: too slow, more than %d bytes of output queued", limit)
		c.q, c.qbytes = nil, 0
		c.signal()
		return false
	}
	c.q = append(c.q, chunk)
	c.qbytes += len(chunk)
	c.signal()
	return true
}

// queued reports the bytes waiting and whether the client still takes output.
func (c *client) queued() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.qbytes, c.failure == "" && !c.gone
}

func (c *client) take() (q [][]byte, exit *int, failure string, gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q = c.q
	c.q, c.spare, c.qbytes = c.spare, nil, 0
	return q, c.exit, c.failure, c.gone
}

func (c *client) recycle(q [][]byte) {
	c.mu.Lock()
	if c.spare == nil {
		c.spare = q[:0]
	}
	c.mu.Unlock()
}

func (c *client) setExit(status int) {
	c.mu.Lock()
	c.exit = &status
	c.mu.Unlock()
	c.signal()
}

func (c *client) fail(reason string) {
	c.mu.Lock()
	if c.failure == "" {
		c.failure = reason
	}
	c.mu.Unlock()
	c.signal()
}

func (c *client) setGone() {
	c.mu.Lock()
	c.gone = true
	c.mu.Unlock()
	c.signal()
}

func (c *client) reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure
}

// ring keeps the last len(buf) bytes written.
type ring struct {
	buf  []byte
	next int  // where the next byte goes
	full bool // buf has wrapped at least once
}

func newRing(n int) *ring { return &ring{buf: make([]byte, n)} }

func (r *ring) Write(p []byte) {
	if len(p) >= len(r.buf) {
		copy(r.buf, p[len(p)-len(r.buf):])
		r.next, r.full = 0, true
		return
	}
	n := copy(r.buf[r.next:], p)
	if n < len(p) {
		copy(r.buf, p[n:])
		r.full = true
	}
	r.next = (r.next + len(p)) % len(r.buf)
	if r.next == 0 && len(p) > 0 {
		r.full = true
	}
}

// Snapshot copies the retained bytes, oldest first.
func (r *ring) Snapshot() []byte {
	if !r.full {
		return bytes.Clone(r.buf[:r.next])
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
