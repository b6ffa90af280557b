package ctxterm

import (
	"context"
	"errors"
	"github.com/cortexfs/ctx/internal/unixsock"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
var ErrInUse = unixsock.ErrInUse

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
// hence SIGHUP — not killtree.TermGroup's SIGTERM; and the wait is on the
// program this server reaps itself, not a poll of the group.
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
