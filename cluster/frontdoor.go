package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/ownership"
	"github.com/cortexfs/ctx/ipc"
)

// The front door (docs/cluster.md "The front door"). Every node serves
// the usual sockets; a request for a session another node serves is
// carried there over a link — one mutual-TLS connection per request to
// the owner's listen address — whose first line is a linkHeader and the
// rest the client's own lines one way and the owner's frames the other.
// The owner hands the link to its own agent socket, so the request takes
// the path a local client's takes (approvals and cancels included), and
// its frames come back in order. The front passes each frame on once:
// one at or below the last seq it passed is dropped. When the link ends
// before the request is answered — the owner lost, fenced, or the
// session moved — the front asks who serves the session now and sends
// the same request there: a send's id replays what was recorded and
// follows the run (P4), so nothing runs twice and the client sees the
// rest of its run, the interrupted conclusion included.

const (
	// linkDialTimeout bounds reaching an owner (TCP and the handshake).
	linkDialTimeout = 2 * time.Second
	// headerTimeout bounds the owner's wait for a link's header.
	headerTimeout = 5 * time.Second
	// maxHeader bounds a link header line.
	maxHeader = 4 << 10
	// patience is how long a request waits, without a frame, for a node
	// to serve its session: longer than a lost node's lease (TTL) plus
	// the failover that follows.
	patience = 30 * time.Second
	// agentWait bounds the wait for a new definition's socket (dialAgent).
	agentWait = 3 * time.Second
	// maxMoves bounds how often one request follows a session that moved
	// (not_owner answers) before the client is told.
	maxMoves = 5
)

// linkHeader opens a link: who asks, for which session.
type linkHeader struct {
	Agent   string `json:"agent"`
	Scope   string `json:"scope"`
	Session string `json:"session"`
	UID     int    `json:"uid"`
}

// serveLinks accepts links from other nodes until ctx ends.
func (n *node) serveLinks(ctx context.Context, ln net.Listener, l layout.Layout, log *slog.Logger) {
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				log.Error("front door: accept", "err", err)
			}
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.serveLink(ctx, c.(*tls.Conn), l, log)
		}()
	}
}

// serveLink checks a link's peer and header and joins it to this node's
// own agent socket until either side ends.
func (n *node) serveLink(ctx context.Context, c *tls.Conn, l layout.Layout, log *slog.Logger) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(headerTimeout))
	if err := c.HandshakeContext(ctx); err != nil {
		log.Warn("front door: a link's handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	peer, _ := clustercert.NodeOf(c.ConnectionState().PeerCertificates[0])
	br := bufio.NewReaderSize(c, maxHeader)
	line, err := br.ReadSlice('\n')
	if err != nil {
		log.Warn("front door: a link without its header", "peer", peer, "err", err)
		return
	}
	var h linkHeader
	if err := json.Unmarshal(line, &h); err != nil || layout.CheckName("agent", h.Agent) != nil {
		log.Warn("front door: a bad link header", "peer", peer, "err", err)
		return
	}
	refuse := func(code, format string, a ...any) {
		f := ipc.ErrorFrame("", ipc.Errorf(code, format, a...))
		f.Session = h.Session
		_, _ = c.Write(f.Line())
	}
	// A cluster belongs to one user (interfaces.md "Cluster (phase 1)"):
	// the front checked its client's peer credentials; the owner checks
	// that they are its own user's.
	if h.UID != os.Getuid() {
		log.Warn("front door: refused a link for another user", "peer", peer, "uid", h.UID)
		refuse(ipc.CodeBadRequest, "this cluster serves uid %d only", os.Getuid())
		return
	}
	own, err := dialAgent(ctx, l, h.Agent, agentWait)
	if err != nil {
		refuse(ipc.CodeUnknownAgent, "node %s serves no agent %s: %v", n.cfg.Node, h.Agent, err)
		return
	}
	defer own.Close()
	_ = c.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() {
		// br holds what was read past the header: the request's lines.
		_, _ = io.Copy(own, br)
		own.(*net.UnixConn).CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, own)
		done <- struct{}{}
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	// Either side's end ends the link: the other copy stops when both
	// connections close (deferred).
	c.Close()
	own.Close()
	<-done
}

// dialAgent dials this node's socket of agent. A definition just made on
// the shared root gets its socket here at the node's next scan of agent/
// (supervisor.ScanInterval), and a starting node's sockets come up with
// its first scan: while the definition exists, it is tried again until
// wait has passed.
func dialAgent(ctx context.Context, l layout.Layout, agent string, wait time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, linkDialTimeout)
		c, err := d.DialContext(dctx, "unix", l.RuntimeAgentSocket(agent))
		cancel()
		if err == nil {
			return c, nil
		}
		if _, serr := os.Stat(l.AgentControl(agent)); serr != nil || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Forward is config.Cluster's front door: it carries req to owner and
// passes the answer to c until the request is answered.
func (n *node) Forward(ctx context.Context, owner, agent string, req *ipc.Request, c *ipc.Conn) {
	line, err := json.Marshal(req)
	if err != nil {
		c.SendFrame(ipc.ErrorFrame("", fmt.Errorf("front door: %w", err)))
		return
	}
	f := &forwarding{n: n, agent: agent, req: req, line: append(line, '\n'), c: c,
		id: ownership.SessionID(agent, req.Scope, req.Session)}
	f.run(ctx, owner)
}

// forwarding is one request on its way through the front door.
type forwarding struct {
	n     *node
	agent string
	req   *ipc.Request
	line  []byte
	c     *ipc.Conn
	id    string

	last     int64  // the last seq passed on
	caughtUp bool   // a caught_up was passed on
	follow   string // resume: the active run followed to its done
}

func (f *forwarding) run(ctx context.Context, owner string) {
	log := f.n.log.With("session", f.id)
	moves := 0
	quiet := time.Now() // the last time a node answered
	wait := 100 * time.Millisecond
	for {
		if ctx.Err() != nil || f.c.Closed() {
			return
		}
		changed := f.n.owners.Changed()
		link, err := f.n.dialLink(ctx, owner, f.agent, f.req)
		if err == nil {
			answered, moved, progress := f.relay(ctx, link, owner)
			link.Close()
			if answered {
				return
			}
			if progress {
				quiet, wait = time.Now(), 100*time.Millisecond
			}
			if moved {
				if moves++; moves > maxMoves {
					f.fail(ipc.CodeNotOwner, "session %s kept moving between nodes; ask again", f.req.Session)
					return
				}
			}
			if !resends(f.req.Op) {
				f.fail(ipc.CodeInternal, "node %s was lost before it answered; ask again", owner)
				return
			}
			log.Info("front door: following the session to its next owner", "from", owner, "last_seq", f.last)
		} else {
			log.Debug("front door: owner unreachable", "owner", owner, "err", err)
		}
		if time.Since(quiet) > patience {
			f.fail(ipc.CodeInternal, "no node served session %s for %v (last tried %s); ask again", f.req.Session, patience, owner)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-f.c.Done():
			return
		case <-changed:
		case <-time.After(wait):
			wait = min(2*wait, time.Second)
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		epoch, me, who, err := f.n.Own(octx, f.agent, f.req.Scope, f.req.Session, false)
		cancel()
		switch {
		case err != nil:
			log.Debug("front door: who serves the session", "err", err)
		case epoch > 0:
			owner = me
		default:
			owner = who
		}
	}
}

// resends says whether an op may be sent again after its owner was lost
// mid-answer: a send or tsh replays by its id (P4), a resume reads again;
// a cancel, remove or rename is answered once or not at all.
func resends(op string) bool {
	return op == ipc.OpSend || op == ipc.OpTsh || op == ipc.OpResume
}

func (f *forwarding) fail(code, format string, a ...any) {
	e := ipc.ErrorFrame("", ipc.Errorf(code, format, a...))
	e.Session = f.req.Session
	f.c.SendFrame(e)
}

// linkFrame is what the front reads of a frame.
type linkFrame struct {
	Type      string  `json:"type"`
	Seq       int64   `json:"seq"`
	Run       string  `json:"run"`
	ID        string  `json:"id"`
	Code      string  `json:"code"`
	ActiveRun *string `json:"active_run"`
}

// relay passes the link's frames to the client until the request is
// answered (answered), the link ends, the session moves (a not_owner
// answer or a new owner in etcd: moved) or the client goes. progress
// says whether any frame came.
func (f *forwarding) relay(ctx context.Context, link net.Conn, owner string) (answered, moved, progress bool) {
	var wmu sync.Mutex
	write := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = link.SetWriteDeadline(time.Now().Add(ipc.WriteTimeout))
		_, err := link.Write(b)
		return err
	}
	if err := write(f.line); err != nil {
		return false, false, false
	}
	// The link ends with the client, the node's context, or a new owner.
	stop := make(chan struct{})
	defer close(stop)
	// movedSeen is set before the watcher closes the link, so the reader
	// that fails on that close sees it.
	var movedSeen atomic.Bool
	go func() {
		for {
			changed := f.n.owners.Changed()
			if o, ok := f.cachedOwner(); ok && o.Node != owner || !ok && !f.n.isLive(owner) {
				movedSeen.Store(true)
				link.Close()
				return
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				link.Close()
				return
			case <-f.c.Done():
				link.Close()
				return
			case <-changed:
			}
		}
	}()
	var asked *ipc.ApprovalWait
	defer func() {
		if asked != nil {
			f.c.CancelApproval(asked)
		}
	}()
	lr := ipc.NewLineReaderSize(link, ipc.MaxFrameLine)
	for {
		line, err := lr.Next()
		if err != nil {
			return false, movedSeen.Load(), progress
		}
		progress = true
		var fr linkFrame
		if json.Unmarshal(line, &fr) != nil {
			continue // not a frame: nothing a client could use
		}
		if fr.Seq > 0 && fr.Seq <= f.last {
			continue // passed on already, before the session moved
		}
		if fr.Type == ipc.TypeError && fr.Seq == 0 && fr.Code == ipc.CodeNotOwner {
			return false, true, progress
		}
		if fr.Type == ipc.TypeCaughtUp {
			if f.caughtUp {
				continue
			}
			f.caughtUp = true
			if fr.ActiveRun != nil {
				f.follow = *fr.ActiveRun
			}
		}
		out := make([]byte, len(line)+1)
		copy(out, line)
		out[len(line)] = '\n'
		if !f.c.Send(out) {
			return true, false, progress // the client is gone or dropped (slow_client)
		}
		if fr.Seq > 0 {
			f.last = fr.Seq
		}
		switch fr.Type {
		case ipc.TypeApprovalRequest:
			// The client's next line answers it on the owner (A2 there).
			w := &ipc.ApprovalWait{Run: fr.Run, ID: fr.ID}
			w.Forward = func(b []byte) {
				if b == nil {
					link.Close()
					return
				}
				_ = write(append(append([]byte(nil), b...), '\n'))
			}
			if f.c.ExpectApproval(w) {
				asked = w
			}
		case ipc.TypeApproval:
			if asked != nil && asked.Run == fr.Run && asked.ID == fr.ID {
				f.c.CancelApproval(asked)
				asked = nil
			}
		}
		if f.answeredBy(&fr) {
			return true, false, progress
		}
	}
}

// answeredBy says whether fr ends the request's answer.
func (f *forwarding) answeredBy(fr *linkFrame) bool {
	if fr.Seq == 0 && fr.Type == ipc.TypeError {
		return true // a transport error answers any request
	}
	switch f.req.Op {
	case ipc.OpSend, ipc.OpTsh:
		return fr.Type == ipc.TypeDone && fr.ID == f.req.ID
	case ipc.OpResume:
		if fr.Type == ipc.TypeCaughtUp {
			return fr.ActiveRun == nil
		}
		return f.follow != "" && fr.Type == ipc.TypeDone && fr.Run == f.follow
	default:
		return fr.Seq == 0 // ack
	}
}

func (f *forwarding) cachedOwner() (ownership.Owner, bool) {
	for _, o := range f.n.owners.Cached() {
		if o.Session == f.id {
			return o, true
		}
	}
	return ownership.Owner{}, false
}

// isLive says whether node is in the live set.
func (n *node) isLive(node string) bool {
	for _, x := range n.live.Nodes() {
		if x.Node == node {
			return true
		}
	}
	return false
}

// dialLink opens a link to owner for req: to this node's own agent socket
// when owner is this node, else mutual TLS to the owner's address (its
// certificate must name it), then the header.
func (n *node) dialLink(ctx context.Context, owner, agent string, req *ipc.Request) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, linkDialTimeout)
	defer cancel()
	if owner == n.cfg.Node {
		var d net.Dialer
		return d.DialContext(dctx, "unix", n.layout.RuntimeAgentSocket(agent))
	}
	addr := ""
	for _, x := range n.live.Nodes() {
		if x.Node == owner {
			addr = x.Addr
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("node %s is not live", owner)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("node %s address %q: %w", owner, addr, err)
	}
	cfg := n.client.Clone()
	cfg.ServerName = host
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node %s at %s: %w", owner, addr, err)
	}
	tc := c.(*tls.Conn)
	if got, _ := clustercert.NodeOf(tc.ConnectionState().PeerCertificates[0]); got != owner {
		c.Close()
		return nil, fmt.Errorf("%s answered as node %q, not %s", addr, got, owner)
	}
	h, _ := json.Marshal(linkHeader{Agent: agent, Scope: req.Scope, Session: req.Session, UID: os.Getuid()})
	_ = c.SetWriteDeadline(time.Now().Add(linkDialTimeout))
	if _, err := c.Write(append(h, '\n')); err != nil {
		c.Close()
		return nil, fmt.Errorf("node %s: %w", owner, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// errFenced is Owning's answer past the deadline.
var errFenced = errors.New("this node's ownership deadline has passed")

// Owning is config.Cluster's fence check.
func (n *node) Owning() error {
	if time.Now().Before(n.member.Deadline()) {
		return nil
	}
	return errFenced
}
