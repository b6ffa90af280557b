package ctlsock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cortexfs/ctx/internal/unixsock"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
)

// DefaultTimeout bounds how long one connection may take to send its frame.
const DefaultTimeout = 10 * time.Second

// Server answers agent.update requests. Each connection carries exactly
// one request: the server reads one line, answers one line and closes the
// connection (U1: the tool sends one frame). The peer is identified by the
// kernel (SO_PEERCRED, a pidfd and the launch-root registry), never by the
// frame. spec: U1–U5
type Server struct {
	Registry *launchroot.Registry
	Layout   layout.Layout // CTX_ROOT holds agent/<name>.d/
	Owner    int           // the only uid accepted (A4: no root exception)
	Ledger   *Ledger
	Log      *slog.Logger  // nil: slog.Default()
	Timeout  time.Duration // per connection; 0: DefaultTimeout
	// Gate, when set, decides every well-formed update before it is
	// written (policy and approval); nil admits all (tests of the
	// protocol alone).
	Gate Gate
}

// Listen binds the control socket at path (layout.Layout.ControlSocket):
// it refuses if a live server answers there, removes a stale socket file,
// and leaves the socket mode 0600. The directory should be the 0700
// runtime directory.
func Listen(path string) (*net.UnixListener, error) {
	// The socket lives alone in its own 0700 directory (layout.ControlSocket).
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	ln, err := unixsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// Serve accepts connections on ln until ctx is cancelled, then closes ln,
// ends open connections and returns nil once every goroutine it started
// has stopped. It returns an error only if accepting fails for good.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	if s.Registry == nil || s.Ledger == nil {
		ln.Close()
		return errors.New("ctlsock: Server needs a Registry and a Ledger")
	}
	if s.Registry.Owner() != s.Owner {
		ln.Close()
		return fmt.Errorf("ctlsock: registry owner %d differs from server owner %d", s.Registry.Owner(), s.Owner)
	}
	log := s.logger()
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("ctlsock: listener closed: %w", err)
			}
			// EMFILE and friends: back off as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			log.Warn("control socket accept", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-ctx.Done():
				_ = ln.Close()
				return nil
			}
		}
		backoff = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

func (s *Server) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	log := s.logger().With("socket", "control")

	// spec: U2, A4 — the kernel's word, before the first byte is parsed.
	peer, err := launchroot.PeerOf(c)
	if err != nil {
		log.Warn("control socket: peer refused", "err", err)
		reply(c, Response{Errno: EPERM, Message: "peer credentials unavailable"})
		return
	}
	defer peer.Close()
	log = log.With("peer_pid", peer.PID, "peer_uid", peer.UID)
	if peer.UID != s.Owner {
		log.Warn("control socket: peer refused", "err", "uid is not the owner")
		reply(c, Response{Errno: EPERM, Message: "peer uid is not the owner"})
		return
	}

	line, err := readFrame(c)
	if err != nil {
		if errors.Is(err, errFrameTooBig) {
			reply(c, Response{Errno: E2BIG, Message: fmt.Sprintf("frame exceeds %d bytes", MaxFrame)})
		} else {
			log.Info("control socket: no frame", "err", err)
		}
		return
	}
	resp := s.handle(ctx, peer, line, log)
	// The gate may have waited for a person: the answer gets its own time.
	_ = c.SetDeadline(time.Now().Add(timeout))
	reply(c, resp)
}

var errFrameTooBig = errors.New("frame too big")

// readFrame reads one line of at most MaxFrame bytes; EOF also ends it.
func readFrame(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(io.LimitReader(r, MaxFrame+1))
	line, err := br.ReadBytes('\n')
	switch {
	case err == nil:
		return line[:len(line)-1], nil
	case errors.Is(err, io.EOF) && len(line) > MaxFrame:
		return nil, errFrameTooBig
	case errors.Is(err, io.EOF) && len(line) > 0:
		return line, nil
	default:
		return nil, err
	}
}

func reply(w io.Writer, resp Response) {
	b, _ := json.Marshal(resp)
	_, _ = w.Write(append(b, '\n'))
}

// wireRequest is Request as the server decodes it: content stays raw so
// that invalid UTF-8 is seen, not replaced.
type wireRequest struct {
	Op        string          `json:"op"`
	RequestID string          `json:"request_id"`
	Agent     string          `json:"agent"`
	Session   string          `json:"session"`
	Run       string          `json:"run"`
	Control   string          `json:"control"`
	Content   json.RawMessage `json:"content"`
	Token     json.RawMessage `json:"token"` // legacy: parsed, ignored (U2)
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func fail(errno, format string, args ...any) Response {
	return Response{Errno: errno, Message: fmt.Sprintf(format, args...)}
}

// handle runs the checks in order: the peer's launch root (EPERM), the
// frame's shape (EINVAL), self-only identity (EPERM), the request id
// (EALREADY; consumed from here on, whatever follows), the control name
// and content (EINVAL, E2BIG), the gate — policy and approval (EPERM) —
// then the atomic write.
func (s *Server) handle(ctx context.Context, peer *launchroot.Peer, line []byte, log *slog.Logger) Response {
	// spec: U2 — a live descendant of a registered root, pinned by pidfd.
	id, err := s.Registry.VerifyPeer(peer)
	if err != nil {
		log.Warn("control socket: peer refused", "err", err)
		return fail(EPERM, "peer is not inside a registered sandbox")
	}
	log = log.With("agent", id.Agent, "session", id.Session, "run", id.Run)

	var req wireRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		log.Info("control socket: bad frame", "err", err)
		return fail(EINVAL, "malformed frame: %v", err)
	}
	if dec.More() {
		return fail(EINVAL, "malformed frame: trailing data")
	}
	if req.Op != OpAgentUpdate {
		return fail(EINVAL, "unknown op %q", req.Op)
	}
	// spec: U3 — self-only: the frame names the capability's own identity.
	if req.Agent != id.Agent || req.Session != id.Session || req.Run != id.Run {
		log.Warn("control socket: identity mismatch", "frame_agent", req.Agent, "frame_session", req.Session, "frame_run", req.Run)
		return fail(EPERM, "agent, session and run must be this run's own")
	}
	if !requestIDRE.MatchString(req.RequestID) {
		return fail(EINVAL, "request_id must match [A-Za-z0-9._:-]{1,128}")
	}
	log = log.With("request_id", req.RequestID, "control", req.Control)

	// spec: U5 — every authorized attempt consumes its id, durably, before
	// anything is written; a seen id is answered EALREADY with no write.
	rec := LedgerRecord{RequestID: req.RequestID, UID: id.UID, Agent: id.Agent, Session: id.Session, Run: id.Run, Control: req.Control, PeerPID: peer.PID}
	if err := s.Ledger.Consume(rec); err != nil {
		if errors.Is(err, ErrSeen) {
			log.Info("control socket: replay refused")
			return fail(EALREADY, "request id %q already used", req.RequestID)
		}
		log.Error("control socket: ledger", "err", err)
		return fail(EIO, "request ledger unavailable")
	}
	resp := s.apply(ctx, id, req, log)
	rec.Result = "ok"
	if !resp.OK {
		rec.Result = resp.Errno
	}
	if err := s.Ledger.Result(rec); err != nil {
		log.Error("control socket: ledger result", "err", err)
	}
	log.Info("control socket: agent.update", "result", rec.Result, "message", resp.Message)
	return resp
}

// apply validates control and content, asks the gate and replaces the
// control file.
func (s *Server) apply(ctx context.Context, id launchroot.Identity, req wireRequest, log *slog.Logger) Response {
	// spec: U4 — only these two control files.
	if !slices.Contains(Controls, req.Control) {
		return fail(EINVAL, "control must be system.md or prompt.template.md")
	}
	if req.Content == nil {
		return fail(EINVAL, "content missing")
	}
	content, strictErr := decodeStrictString(req.Content)
	if strictErr != nil && !errors.Is(strictErr, errStrictString) {
		return fail(EINVAL, "content must be a JSON string")
	}
	// spec: U4 — ≤ 8 KiB, UTF-8, no NUL.
	if len(content) > MaxContent {
		return fail(E2BIG, "content is %d bytes, limit %d", len(content), MaxContent)
	}
	if strictErr != nil {
		return fail(EINVAL, "content is not valid UTF-8")
	}
	if bytes.IndexByte([]byte(content), 0) >= 0 {
		return fail(EINVAL, "content contains NUL")
	}
	if err := layout.CheckName("agent", id.Agent); err != nil {
		return fail(EINVAL, "%v", err)
	}
	if _, err := os.Lstat(s.Layout.AgentObject(id.Agent)); err != nil {
		return fail(EINVAL, "agent %q is not defined", id.Agent)
	}
	if s.Gate != nil {
		// The agent's policy and approval mode, as for a tool call: only
		// now, so the person is asked about exactly what would be written.
		r := Request{Op: req.Op, RequestID: req.RequestID, Agent: id.Agent, Session: id.Session, Run: id.Run, Control: req.Control, Content: content}
		if err := s.Gate.Admit(ctx, id, r); err != nil {
			log.Warn("control socket: update refused", "err", err)
			return fail(EPERM, "%v", err)
		}
	}
	dir := s.Layout.AgentControl(id.Agent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(EIO, "control dir: %v", err)
	}
	path := filepath.Join(dir, req.Control)
	perm := os.FileMode(0o644)
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() {
		perm = st.Mode().Perm()
	}
	// spec: U4 — atomic replace (or create); a symlink there is replaced,
	// never followed.
	if err := atomicfile.WriteFile(path, []byte(content), perm); err != nil {
		return fail(EIO, "write %s: %v", req.Control, err)
	}
	return Response{OK: true}
}
