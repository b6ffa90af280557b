package ctxterm

// Connections: accepting, the hello handshake with peer credentials,
// each client's reader and writer.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cortexfs/ctx/internal/unixsock"
	"io"
	"net"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// listen binds the terminal socket. spec: T2 (socket hygiene: 0700 dir,
// dial first, refuse if alive, else remove the stale file, 0600).
func listen(path string) (*net.UnixListener, error) {
	ln, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("ctxterm: %w", err)
	}
	return ln, nil
}

func (s *Server) acceptLoop() {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("accept", "err", err)
				time.Sleep(10 * time.Millisecond) // EMFILE and friends: do not spin
				continue
			}
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
		}()
	}
}

// refuse sends one error frame to a connection no other goroutine uses yet,
// then closes it.
func refuse(conn *net.UnixConn, reason string) {
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = conn.Write(AppendFrame(nil, FrameError, []byte(validReason(reason))))
	conn.Close()
}

func (s *Server) serveConn(conn *net.UnixConn) {
	// spec: T2 — peer credentials are checked before a byte is parsed.
	cred, err := peerCred(conn)
	if err != nil {
		s.log.Warn("peer credentials", "err", err)
		refuse(conn, "cannot read peer credentials")
		return
	}
	if !s.uids[int(cred.Uid)] {
		s.log.Warn("refused peer", "peer_uid", cred.Uid, "peer_pid", cred.Pid)
		refuse(conn, fmt.Sprintf("permission denied: uid %d may not join this terminal", cred.Uid))
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(helloTimeout))
	br := bufio.NewReaderSize(conn, 32<<10)
	line, err := readLine(br, MaxHelloLen)
	var h Hello
	if err == nil {
		h, err = ParseHello(line)
	}
	if err != nil {
		s.log.Info("bad hello", "peer_pid", cred.Pid, "err", err)
		refuse(conn, "bad hello: "+err.Error())
		return
	}
	_ = conn.SetReadDeadline(time.Time{})

	c := &client{conn: conn, mode: h.Mode, pid: int(cred.Pid), uid: int(cred.Uid), since: time.Now(), wake: make(chan struct{}, 1)}
	s.mu.Lock()
	full := len(s.clients) >= s.cfg.MaxClients
	s.mu.Unlock()
	if full {
		refuse(conn, fmt.Sprintf("too many clients (%d)", s.cfg.MaxClients))
		return
	}
	if h.Mode == ModeAttach && h.Cols > 0 && h.Rows > 0 {
		s.resize(c, h.Cols, h.Rows) // only a client that is let in may resize
	}
	s.mu.Lock()
	if len(s.clients) >= s.cfg.MaxClients {
		s.mu.Unlock()
		refuse(conn, fmt.Sprintf("too many clients (%d)", s.cfg.MaxClients))
		return
	}
	replay := s.ring.Snapshot() // spec: T2 — bounded scrollback replay, then live
	ready := Ready{V: ProtocolVersion, Mode: h.Mode, PID: s.cmd.Process.Pid, Cols: s.cols, Rows: s.rows}
	if s.exited {
		c.setExit(s.status)
	}
	s.clients[c] = struct{}{}
	s.mu.Unlock()
	s.emit(Event{Type: EventAttached, Mode: c.mode, PID: c.pid, UID: c.uid, Cols: ready.Cols, Rows: ready.Rows})

	writerDone := make(chan struct{})
	go func() { defer close(writerDone); s.writeLoop(c, ready, replay) }()

	reason := s.readLoop(c, br)

	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	// Once out of s.clients neither dropSlow nor Serve's flush deadline
	// reaches this connection: bound a writer stuck on a full socket (a
	// half-closed peer that never reads) or <-writerDone never returns.
	_ = conn.SetWriteDeadline(time.Now().Add(slowGrace))
	c.setGone()
	s.signalRoom()
	<-writerDone
	if r := c.reason(); r != "" {
		reason = r
	}
	s.emit(Event{Type: EventDetached, Mode: c.mode, PID: c.pid, UID: c.uid, Reason: reason})
}

// readLoop reads the client's frames until the connection ends and says why.
func (s *Server) readLoop(c *client, br *bufio.Reader) string {
	dec := NewDecoder(br, MaxPayload)
	for {
		f, err := dec.Next()
		if err != nil {
			if errors.Is(err, ErrProtocol) || errors.Is(err, io.ErrUnexpectedEOF) {
				c.fail(err.Error())
				return "protocol error"
			}
			return "closed"
		}
		switch f.Type {
		case FrameData:
			// spec: S5/T2 — watch is read-only, enforced here: a watch
			// connection's bytes never reach the PTY.
			if c.mode == ModeAttach {
				s.input(f.Payload)
			}
		case FrameResize:
			cols, rows, err := ParseResize(f.Payload)
			if err != nil {
				c.fail(err.Error())
				return "protocol error"
			}
			if c.mode == ModeAttach && cols > 0 && rows > 0 {
				s.resize(c, int(cols), int(rows))
			}
		default:
			c.fail(fmt.Sprintf("frame type 0x%02x not accepted from a client", f.Type))
			return "protocol error"
		}
	}
}

func (s *Server) emit(e Event) {
	if s.cfg.Events == nil {
		return
	}
	e.Time = time.Now()
	s.cfg.Events(e)
}

// writeLoop is the only writer of c.conn: the ready frame, the replay, then
// queued output in writev batches, then the exit or error frame. It closes
// the connection when it returns.
func (s *Server) writeLoop(c *client, ready Ready, replay []byte) {
	defer c.conn.Close()
	rj, _ := json.Marshal(ready)
	first := AppendFrame(nil, FrameReady, rj)
	for len(replay) > 0 {
		n := min(len(replay), MaxPayload)
		first = AppendFrame(first, FrameData, replay[:n])
		replay = replay[n:]
	}
	if _, err := c.conn.Write(first); err != nil {
		return
	}
	var hdrs []byte
	var bufs net.Buffers
	for {
		// Under load, yielding once lets the PTY reader queue more chunks so
		// one writev carries them (fewer syscalls); idle, it costs nothing.
		if n, _ := c.queued(); n > 0 && n < batchHint {
			runtime.Gosched()
		}
		q, exit, failure, gone := c.take()
		if len(q) > 0 {
			s.signalRoom()
		}
		if failure != "" {
			_ = c.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.conn.Write(AppendFrame(nil, FrameError, []byte(validReason(failure))))
			return
		}
		if gone {
			return
		}
		if len(q) > 0 {
			if cap(hdrs) < HeaderLen*len(q) {
				hdrs = make([]byte, HeaderLen*len(q))
			}
			hdrs = hdrs[:HeaderLen*len(q)]
			bufs = bufs[:0]
			for i, chunk := range q {
				h := hdrs[i*HeaderLen : (i+1)*HeaderLen]
				putHeader(h, FrameData, len(chunk))
				bufs = append(bufs, h, chunk)
			}
			if _, err := bufs.WriteTo(c.conn); err != nil {
				return
			}
			clear(q)
			c.recycle(q)
			continue
		}
		if exit != nil {
			_ = c.conn.SetWriteDeadline(time.Now().Add(flushTimeout))
			_, _ = c.conn.Write(AppendFrame(nil, FrameExit, ExitPayload(*exit)))
			return
		}
		<-c.wake
	}
}

// readLine reads one '\n'-terminated line of at most max bytes (newline
// excluded) without reading past it.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		b, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("hello: %w", err)
		}
		if b == '\n' {
			return line, nil
		}
		if len(line) >= max {
			return nil, fmt.Errorf("hello: longer than %d bytes: %w", max, ErrProtocol)
		}
		line = append(line, b)
	}
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) { return unixsock.PeerCred(c) }
