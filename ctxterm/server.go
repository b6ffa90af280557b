package ctxterm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Defaults for [Config] fields left zero.
const (
	DefaultScrollback  = 64 << 10 // bytes replayed to a client when it joins
	DefaultClientQueue = 4 << 20  // bytes queued for one client before it is dropped
	DefaultMaxClients  = 64
	DefaultHangupGrace = 2 * time.Second
	defaultCols        = 80
	defaultRows        = 24
	helloTimeout       = 10 * time.Second
	drainTimeout       = 500 * time.Millisecond // output still readable after the program exits
	flushTimeout       = 2 * time.Second        // clients get this long to take the exit frame
	readBufSize        = 64 << 10
	batchHint          = 16 << 10
	slowGrace          = time.Second // a dropped client's last batch must be taken within this
	// stallTimeout bounds how long the PTY reader waits for the fastest
	// client to make room before it drops every client that is behind.
	stallTimeout = time.Second
)

// ErrInUse is returned by [New] when a live server already answers on the socket.
var ErrInUse = errors.New("terminal socket in use")

// Config describes one terminal server.
type Config struct {
	Socket string   // unix socket path; its directory is created 0700 if missing
	Argv   []string // the program and its arguments
	Dir    string   // working directory of the program ("" = ours)
	Env    []string // environment of the program (nil = ours)
	// ExtraFiles are handed to the program as descriptors 3, 4, … (e.g.
	// a seccomp filter for bwrap).
	ExtraFiles []*os.File

	Cols, Rows  int   // initial PTY size (0 = 80x24)
	Scrollback  int   // replay buffer in bytes (0 = DefaultScrollback)
	ClientQueue int   // per-client queue bound in bytes (0 = DefaultClientQueue)
	MaxClients  int   // concurrent clients (0 = DefaultMaxClients)
	AllowedUIDs []int // peer uids accepted (empty = only our own uid)

	// HangupGrace is how long the program has to exit after SIGHUP when the
	// server's context is cancelled, before its process group gets SIGKILL.
	HangupGrace time.Duration

	// Events, if set, is called for every terminal event, from the goroutine
	// that caused it; it must be quick and safe for concurrent use.
	Events func(Event)
	Logger *slog.Logger
}

// EventType names a terminal event; the names are those of the terminal
// resource's events.jsonl (runtime.md T5).
type EventType string

// Terminal events.
const (
	EventAttached EventType = "attached"
	EventDetached EventType = "detached"
	EventResized  EventType = "resized"
	EventExited   EventType = "exited"
)

// Event is one thing that happened to the terminal.
type Event struct {
	Type   EventType
	Time   time.Time
	Mode   Mode   // attached, detached, resized: the client's mode
	PID    int    // attached, detached, resized: the peer's pid (SO_PEERCRED)
	UID    int    // attached, detached, resized: the peer's uid
	Cols   int    // attached (the PTY size then), resized
	Rows   int    //
	Status int    // exited: the program's exit status
	Reason string // detached: why the connection ended
}

// ClientInfo describes one connected client.
type ClientInfo struct {
	Mode  Mode
	PID   int
	UID   int
	Since time.Time
}

// Server owns a PTY running one program and serves it on a unix socket.
type Server struct {
	cfg  Config
	log  *slog.Logger
	ln   *net.UnixListener
	ptm  *os.File // PTY master; never call Fd() on it (it would turn blocking)
	cmd  *exec.Cmd
	uids map[int]bool

	inMu sync.Mutex // serializes input written to the PTY

	mu         sync.Mutex // guards the fields below; never held while writing to a client
	ring       *ring
	clients    map[*client]struct{}
	cols, rows int
	exited     bool
	status     int

	room   chan struct{}  // capacity 1: a client took output from its queue, or left
	wg     sync.WaitGroup // one per connection
	served atomic.Bool
}

// New binds the socket (0600, in a 0700 directory; a stale socket is
// removed, a live one refused with ErrInUse) and starts the program on a new
// PTY in its own session. The caller must then call Serve, which reaps it.
func New(cfg Config) (*Server, error) {
	if len(cfg.Argv) == 0 {
		return nil, errors.New("ctxterm: no program to run")
	}
	if cfg.Socket == "" {
		return nil, errors.New("ctxterm: no socket path")
	}
	if cfg.Cols <= 0 || cfg.Rows <= 0 {
		cfg.Cols, cfg.Rows = defaultCols, defaultRows
	}
	if cfg.Scrollback <= 0 {
		cfg.Scrollback = DefaultScrollback
	}
	if cfg.ClientQueue <= 0 {
		cfg.ClientQueue = DefaultClientQueue
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.HangupGrace <= 0 {
		cfg.HangupGrace = DefaultHangupGrace
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		log:     log.With("socket", cfg.Socket),
		uids:    map[int]bool{},
		ring:    newRing(cfg.Scrollback),
		clients: map[*client]struct{}{},
		room:    make(chan struct{}, 1),
		cols:    cfg.Cols,
		rows:    cfg.Rows,
	}
	if len(cfg.AllowedUIDs) == 0 {
		s.uids[os.Getuid()] = true
	}
	for _, u := range cfg.AllowedUIDs {
		s.uids[u] = true
	}
	ln, err := listen(cfg.Socket)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	if err := s.start(); err != nil {
		ln.Close()
		return nil, err
	}
	s.log = s.log.With("pid", s.cmd.Process.Pid)
	s.log.Info("terminal started", "argv", cfg.Argv)
	return s, nil
}

// listen prepares the socket path and binds it. spec: T2 (socket hygiene:
// 0700 dir, dial first, refuse if alive, else remove the stale file, 0600).
func listen(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("ctxterm: socket dir: %w", err)
		}
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("ctxterm: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("ctxterm: listen %s: %w", path, ErrInUse)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ctxterm: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("ctxterm: listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ctxterm: chmod socket: %w", err)
	}
	return ln, nil
}

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

// Addr is the socket path.
func (s *Server) Addr() string { return s.cfg.Socket }

// PID is the program's pid (also its process group and session id).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Clients lists the connected clients.
func (s *Server) Clients() []ClientInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ClientInfo, 0, len(s.clients))
	for c := range s.clients {
		out = append(out, ClientInfo{Mode: c.mode, PID: c.pid, UID: c.uid, Since: c.since})
	}
	return out
}

// Serve relays the PTY to clients until the program exits, then reports its
// exit status to every client, closes the socket (removing the file) and
// returns the status. Cancelling ctx hangs up the PTY (SIGHUP to the
// program's process group, SIGKILL after HangupGrace); that is not an error.
func (s *Server) Serve(ctx context.Context) (int, error) {
	if !s.served.CompareAndSwap(false, true) {
		return -1, errors.New("ctxterm: Serve called twice")
	}
	readDone := make(chan struct{})
	go func() { defer close(readDone); s.readPTY() }()
	waitDone := make(chan struct{})
	go func() { defer close(waitDone); _ = s.cmd.Wait() }() // the status is in ProcessState
	acceptDone := make(chan struct{})
	go func() { defer close(acceptDone); s.acceptLoop() }()

	select {
	case <-waitDone:
	case <-ctx.Done():
		s.hangup(waitDone)
	}
	<-waitDone
	status := exitStatus(s.cmd.ProcessState)

	// After the child exits, the master still yields what it wrote, then EIO.
	// A grandchild holding the slave open would keep it from ever ending.
	select {
	case <-readDone:
	case <-time.After(drainTimeout):
	}
	s.ptm.Close()
	<-readDone

	s.mu.Lock()
	s.exited, s.status = true, status
	for c := range s.clients {
		c.setExit(status)
	}
	s.mu.Unlock()
	s.log.Info("program exited", "status", status)
	s.emit(Event{Type: EventExited, Status: status})

	s.ln.Close() // also unlinks the socket file
	<-acceptDone
	allDone := make(chan struct{})
	go func() { s.wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(flushTimeout):
		s.mu.Lock()
		for c := range s.clients {
			_ = c.conn.SetDeadline(time.Now())
		}
		s.mu.Unlock()
		<-allDone
	}
	return status, nil
}

// hangup ends the program: the PTY is hung up (closing the master sends
// SIGHUP to the foreground job), its process group gets SIGHUP, then SIGKILL
// if it has not exited within HangupGrace. Interactive shells ignore SIGTERM,
// hence SIGHUP.
func (s *Server) hangup(waitDone <-chan struct{}) {
	pid := s.cmd.Process.Pid
	s.log.Info("hanging up")
	_ = syscall.Kill(-pid, syscall.SIGHUP)
	s.ptm.Close()
	t := time.NewTimer(s.cfg.HangupGrace)
	defer t.Stop()
	select {
	case <-waitDone:
	case <-t.C:
		s.log.Warn("program ignored SIGHUP; killing its process group")
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
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

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("peer credentials: %w", cerr)
	}
	return cred, nil
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
