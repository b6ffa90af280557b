// Package agent is the actor of one agent definition: it serves the agent
// socket (agent/<name>.sock), checks every peer's credentials before the
// first byte, parses requests and routes them to one session actor per
// (scope, session). spec: P1, P2, A4, L6
package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/run"
	"github.com/cortexfs/ctx/actors/session"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/internal/workspace"
	"github.com/cortexfs/ctx/ipc"
)

// Actor is one agent definition's runtime.
type Actor struct {
	cfg  *config.Config
	name string
	log  *slog.Logger

	ln       *net.UnixListener
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	conns    map[*ipc.Conn]bool
	sessions map[session.Key]*actor.PID
	cancels  map[int]*pendingCancel // broadcast cancels waiting for every session's answer
	token    int
	keeps    map[session.Key]*session.Keep
	// routed counts requests sent to each session actor (by actor id).
	routed map[string]int
	// resolving holds, per session, the requests waiting for a cluster
	// node's ownership answer, in arrival order.
	resolving map[session.Key][]*incoming
	// spawned numbers session actors: each takes a name of its own, so a
	// passivated one that still holds its name while it stops is never in
	// the way, and nothing here grows with passivations.
	spawned int

	// live is every accepted connection (idle ones included), touched by the
	// accept and reader goroutines and by onStopping, under liveMu.
	liveMu   sync.Mutex
	live     map[*ipc.Conn]bool
	stopping bool
}

// Receive only dispatches.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.onStarted(c)
	case *incoming:
		a.onIncoming(c, m)
	case *connClosed:
		a.onConnClosed(c, m)
	case *session.Drain:
		for _, pid := range a.sessions {
			c.Send(pid, m)
		}
	case *session.Idle:
		a.onSessionIdle(c, m)
	case *session.CancelChecked:
		a.onCancelChecked(m)
	case *owned:
		a.onOwned(c, m)
	case *sessionsFound:
		if a.cfg.Cluster != nil {
			// A cluster's sessions open only under an ownership from
			// etcd; an open run is concluded by whichever node next owns
			// the session (docs/cluster.md).
			break
		}
		for _, k := range m.keys {
			a.sessionPID(c, session.Key{Agent: a.name, Scope: k[0], Name: k[1]})
		}
	case *listenFailed:
		a.onListenFailed(c, m)
	case *relisten:
		if a.ln == nil && a.ctx.Err() == nil {
			a.listen(c)
		}
	case *actor.Terminated:
		a.onChildGone(m)
	case *actor.Stopping:
		a.onStopping()
	case *actor.Restarting:
		// A crash: this incarnation's listener, connections and goroutines
		// go with it, so the next one can bind the socket again. Its
		// sessions were stopped first (they conclude an active run as
		// interrupted, not as a shutdown's cancel).
		a.onStopping()
	case *stateSizes:
		c.Respond(&sizes{len(a.sessions), len(a.keeps), len(a.routed)})
	case *actor.Stopped:
	default:
		a.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) onStarted(c actor.Context) {
	a.log = a.cfg.Log.With("actor", "agent", "agent", a.name)
	a.ctx, a.stop = context.WithCancel(context.Background())
	a.conns = map[*ipc.Conn]bool{}
	a.sessions = map[session.Key]*actor.PID{}
	a.cancels = map[int]*pendingCancel{}
	a.routed = map[string]int{}
	if a.keeps == nil {
		a.keeps = map[session.Key]*session.Keep{}
	}
	l := a.cfg.Layout
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		// One /etc mount per sandbox instead of one per file (cheap when fresh).
		if err := sandbox.EnsureEtc(l); err != nil {
			a.log.Warn("no /etc snapshot; sandboxes bind /etc file by file", "err", err)
		}
	}()
	self, root := c.Self(), c.ActorSystem().Root
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		root.Send(self, &sessionsFound{keys: openSessions(a.cfg, a.name)})
	}()
	a.listen(c)
}

// listenRetry is how long a failed listen waits before it is tried again.
const listenRetry = 500 * time.Millisecond

// listen binds the agent socket and starts accepting. A failure is
// logged and tried again after listenRetry while the actor lives: an agent
// that lost its socket (a crash racing the old listener's close, a stale
// file another process held) comes back instead of staying deaf.
func (a *Actor) listen(c actor.Context) {
	l := a.cfg.Layout
	ln, err := ipc.Listen(l.RuntimeAgentSocket(a.name))
	if err != nil {
		c.Send(c.Self(), &listenFailed{err: err})
		return
	}
	a.ln = ln
	// agent/<name>.sock aliases the runtime socket (L6) — not on a
	// cluster's shared root, where every node would point it at its own
	// socket and a client falling back to it would reach another node.
	if a.cfg.Cluster == nil {
		link := l.AgentSocket(a.name)
		if st, err := os.Lstat(link); err == nil && st.Mode()&os.ModeSymlink != 0 || errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(link)
			if err := os.Symlink(l.RuntimeAgentSocket(a.name), link); err != nil {
				a.log.Warn("could not link the agent socket", "link", link, "err", err)
			}
		}
	}
	self, root := c.Self(), c.ActorSystem().Root
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.accept(root, self)
	}()
	a.log.Info("serving", "socket", l.RuntimeAgentSocket(a.name))
}

// openSessions finds sessions whose log ends inside a run (no done).
func openSessions(cfg *config.Config, name string) [][2]string {
	var out [][2]string
	for _, scope := range []string{"private", "shared"} {
		dir := cfg.Layout.SessionsDir(name, scope)
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			b, err := readTail(filepath.Join(dir, e.Name(), store.EventsFile), tailBytes)
			if err != nil {
				continue
			}
			if runOpen(b) {
				out = append(out, [2]string{scope, e.Name()})
			}
		}
	}
	return out
}

// tailBytes is how much of a log's end openSessions reads: a done frame
// is far shorter, so a last line longer than this is not one
// (a start with thousands of sessions reads kilobytes each, not their logs).
const tailBytes = 64 << 10

// readTail reads at most limit bytes from the end of the file at path.
func readTail(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-limit, 0)
	b := make([]byte, st.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && n < len(b) {
		return nil, err
	}
	return b[:n], nil
}

// runOpen: runs of a session are sequential and each ends with its done
// frame, so a log whose last complete frame is not done has an open run.
func runOpen(log []byte) bool {
	log = bytes.TrimRight(log, "\n")
	if len(log) == 0 {
		return false
	}
	last := log[bytes.LastIndexByte(log, '\n')+1:]
	return !bytes.HasPrefix(last, []byte(`{"type":"done"`))
}

// accept runs until the listener closes; each connection gets a reader.
func (a *Actor) accept(root *actor.RootContext, self *actor.PID) {
	for {
		c, err := a.ln.AcceptUnix()
		if err != nil {
			return
		}
		cred, err := ipc.PeerCred(c)
		// spec: A4 — agent sockets accept only the owner's uid; checked before the first byte.
		if err != nil || int(cred.Uid) != a.cfg.Layout.UID {
			uid := -1
			if cred != nil {
				uid = int(cred.Uid)
			}
			a.log.Warn("refused a connection", "uid", uid, "err", err)
			c.Close()
			continue
		}
		conn := ipc.NewConn(c, *cred)
		a.liveMu.Lock()
		if a.stopping {
			a.liveMu.Unlock()
			conn.Close()
			continue
		}
		if a.live == nil {
			a.live = map[*ipc.Conn]bool{}
		}
		a.live[conn] = true
		a.liveMu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.read(root, self, conn)
		}()
	}
}

// read parses request lines. Bad lines get an error frame and the
// connection stays usable; an over-long line closes it (interfaces.md).
func (a *Actor) read(root *actor.RootContext, self *actor.PID, conn *ipc.Conn) {
	defer root.Send(self, &connClosed{conn: conn})
	defer func() { a.liveMu.Lock(); delete(a.live, conn); a.liveMu.Unlock() }()
	// The daemon answers ping before its installs are
	// done; a request that may start a sandbox waits for them.
	select {
	case <-a.cfg.Warmed():
	case <-a.ctx.Done():
		conn.Close()
		return
	}
	lr := ipc.NewLineReader(conn.Raw())
	for {
		line, err := lr.Next()
		if w := conn.TakeApproval(); w != nil {
			// spec: A2 — exactly one response is read for a pending approval.
			if w.Forward != nil {
				// Asked by another node's run (the front door): the line
				// goes to it whole, as read.
				if err != nil {
					w.Forward(nil)
				} else {
					w.Forward(line)
					continue
				}
			} else if err != nil {
				w.Answer("eof")
			} else if req, perr := ipc.ParseRequest(line); perr == nil && req.Op == ipc.OpCancel {
				// A cancel on the connection that is asked
				// (`ctx agent send`'s Ctrl+C) cancels the run; the approval
				// is recorded as not given. The cancel goes first, so the
				// run ends cancelled rather than running its next step.
				root.Send(self, &incoming{conn: conn, req: req})
				w.Answer(ipc.DecisionDeny)
				continue
			} else {
				w.Reason = ipc.ApprovalReason(line)
				w.Answer(ipc.ClassifyApproval(line, w.Run, w.ID))
				continue
			}
		}
		if err != nil {
			if errors.Is(err, ipc.ErrTooLarge) {
				conn.SendFrame(ipc.ErrorFrame("", err))
			}
			conn.Close()
			return
		}
		req, err := ipc.ParseRequest(line)
		if err == nil {
			err = checkWorkspace(a.cfg.Layout, a.name, a.log, req)
		}
		if err == nil {
			err = checkShared(a.cfg.Cluster, req)
		}
		if err == nil {
			err = checkCwd(a.cfg.Layout, a.name, req)
		}
		if err == nil {
			err = checkImages(a.cfg.Layout, a.name, req)
		}
		if err != nil {
			conn.SendFrame(ipc.ErrorFrame("", err))
			continue
		}
		switch req.Op {
		case ipc.OpPing:
			conn.SendFrame(&ipc.Frame{Type: ipc.TypePong, Version: config.Version})
		case ipc.OpApprove:
			// Carries the run: a late answer (after a timeout) does not end the client's view of its run.
			conn.SendFrame(ipc.ErrorFrame(req.Run, ipc.Errorf(ipc.CodeBadRequest, "no approval is pending on this connection")))
		default:
			root.Send(self, &incoming{conn: conn, req: req})
		}
	}
}

// checkWorkspace judges a request's workspace once, before anything is
// recorded (interfaces.md): an existing directory the owner can
// write, opened without a symlink after its own path is resolved, not /,
// the owner's home or an ancestor of it unless .d/protect allows it, not
// inside CTX_ROOT or the runtime dir. The request then carries its real
// path, which every start of the run opens again without following a
// symlink. Nothing is created.
func checkWorkspace(l layout.Layout, agent string, log *slog.Logger, r *ipc.Request) error {
	if r.Workspace == "" {
		return nil
	}
	d, err := agentdef.OpenWorkspace(l, agent, r.Workspace, log)
	if err != nil {
		// Said once, with the rule a newcomer has not met yet: the code
		// says it is a bad request, the text what and how to go on.
		msg := strings.TrimSuffix(err.Error(), ": "+workspace.ErrRefused.Error())
		return ipc.Errorf(ipc.CodeBadRequest, "%s — the directory ctx is run from is the run's workspace, which the agent may write: run it from the project's directory", msg)
	}
	r.Workspace = d.Path
	return d.Close()
}

// checkShared refuses, on a cluster node, a workspace no other node can
// reach: outside every shared prefix (interfaces.md "Cluster (phase 1)"),
// before anything is recorded. The single daemon has no cluster.
func checkShared(c config.Cluster, r *ipc.Request) error {
	if c == nil || r.Workspace == "" || c.WorkspaceShared(r.Workspace) {
		return nil
	}
	return ipc.Errorf(ipc.CodeWorkspaceNotShared, "workspace %s is outside the cluster's shared workspaces: every node must reach it; run from a directory under one of them", r.Workspace)
}

// checkImages refuses, before anything is recorded, a send with images to
// an executable (sdk-envelope-v1) agent: its envelope has no place for
// them. A model agent passes them to its provider; an acp-v1 agent gets
// them when it said it takes images (its run ends with an error if not).
func checkImages(l layout.Layout, agent string, r *ipc.Request) error {
	if r.Op != ipc.OpSend || len(r.Images) == 0 {
		return nil
	}
	b, err := agentdef.ReadControl(filepath.Join(l.AgentControl(agent), "abi"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a model agent
	}
	if err != nil {
		return nil // an invalid definition: the run says so
	}
	if abi, _ := agentdef.OneLine(b); abi == agentdef.ABIACP {
		return nil
	}
	return run.NoImagesError(agent)
}

func (a *Actor) onIncoming(c actor.Context, m *incoming) {
	a.cfg.Hit("agent.incoming")
	a.conns[m.conn] = true
	if m.req.Op == ipc.OpCancel && m.req.Session == "" {
		// A bare run id: every live session checks whether it is theirs, and
		// the client hears not_found when none was.
		a.token++
		pc := &pendingCancel{conn: m.conn, id: m.req.ID}
		for _, pid := range a.sessions {
			c.Send(pid, &session.Request{Conn: m.conn, Req: m.req, Token: a.token})
			a.routed[pid.Id]++
			pc.waiting++
		}
		if pc.waiting == 0 {
			m.conn.SendFrame(ipc.ErrorFrame("", ipc.Errorf(ipc.CodeNotFound, "no active run %s", m.req.ID)))
			return
		}
		a.cancels[a.token] = pc
		return
	}
	key := session.Key{Agent: a.name, Scope: m.req.Scope, Name: m.req.Session}
	if _, live := a.sessions[key]; !live && (m.req.Op == ipc.OpRemove || m.req.Op == ipc.OpRename) {
		// Removing a session that does not exist creates nothing.
		if _, err := os.Lstat(a.cfg.Layout.SessionDir(a.name, key.Scope, key.Name)); errors.Is(err, os.ErrNotExist) {
			f := ipc.ErrorFrame("", ipc.Errorf(ipc.CodeNotFound, "no such session %s (%s)", key.Name, key.Scope))
			f.Session = key.Name
			m.conn.SendFrame(f)
			return
		}
	}
	if _, live := a.sessions[key]; !live && a.cfg.Cluster != nil {
		a.resolve(c, key, m)
		return
	}
	pid := a.sessionPID(c, key)
	c.Send(pid, &session.Request{Conn: m.conn, Req: m.req})
	a.routed[pid.Id]++
}

type pendingCancel struct {
	conn    *ipc.Conn
	id      string
	waiting int
	found   bool
}

func (a *Actor) onCancelChecked(m *session.CancelChecked) {
	pc := a.cancels[m.Token]
	if pc == nil {
		return
	}
	pc.waiting--
	pc.found = pc.found || m.Found
	if pc.waiting > 0 {
		return
	}
	delete(a.cancels, m.Token)
	if !pc.found {
		pc.conn.SendFrame(ipc.ErrorFrame("", ipc.Errorf(ipc.CodeNotFound, "no active run %s", pc.id)))
	}
}

func (a *Actor) sessionPID(c actor.Context, key session.Key) *actor.PID {
	if pid, ok := a.sessions[key]; ok {
		return pid
	}
	keep := a.keeps[key]
	if keep == nil {
		keep = session.NewKeep()
		a.keeps[key] = keep
	}
	a.spawned++
	name := key.Scope + ":" + key.Name + "~" + strconv.Itoa(a.spawned)
	pid, err := c.SpawnNamed(session.Props(a.cfg, key, keep), name)
	if err != nil {
		a.log.Error("spawn session", "err", err)
	}
	a.sessions[key] = pid
	return pid
}

func (a *Actor) onConnClosed(c actor.Context, m *connClosed) {
	delete(a.conns, m.conn)
	if m.conn.Dropped() {
		a.log.Warn("dropped a client that did not keep up with its frames", "uid", m.conn.Cred.Uid, "pid", m.conn.Cred.Pid)
	}
	for _, pid := range a.sessions {
		c.Send(pid, &session.ConnClosed{Conn: m.conn})
	}
}

// onSessionIdle passivates an idle session: it is forgotten and stopped
// when every request routed to it has reached it (so none is lost), and
// its Keep (empty: it has no follower) goes with it.
func (a *Actor) onSessionIdle(c actor.Context, m *session.Idle) {
	pid, ok := a.sessions[m.Key]
	if !ok || !pid.Equal(m.PID) || a.routed[pid.Id] != m.Seen {
		return
	}
	delete(a.sessions, m.Key)
	if keep := a.keeps[m.Key]; keep != nil && a.cfg.Cluster != nil && keep.Epoch > 0 {
		a.release(m.Key, keep)
	}
	delete(a.keeps, m.Key)
	delete(a.routed, pid.Id)
	c.Stop(pid)
	a.cfg.Passivated()
	a.log.Debug("session passivated", "scope", m.Key.Scope, "session", m.Key.Name)
}

func (a *Actor) onChildGone(m *actor.Terminated) {
	delete(a.routed, m.Who.Id)
	for k, pid := range a.sessions {
		if pid.Equal(m.Who) {
			delete(a.sessions, k)
		}
	}
}

func (a *Actor) onListenFailed(c actor.Context, m *listenFailed) {
	a.log.Error("agent socket unavailable; trying again", "err", m.err, "in", listenRetry)
	self, root, ctx := c.Self(), c.ActorSystem().Root, a.ctx
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		t := time.NewTimer(listenRetry)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, &relisten{})
		case <-ctx.Done():
		}
	}()
}

func (a *Actor) onStopping() {
	if a.stop != nil {
		a.stop()
	}
	if a.ln != nil {
		a.ln.Close()
		link := a.cfg.Layout.AgentSocket(a.name)
		if st, err := os.Lstat(link); err == nil && st.Mode()&os.ModeSymlink != 0 {
			_ = os.Remove(link)
		}
	}
	a.liveMu.Lock()
	a.stopping = true
	for conn := range a.live {
		conn.Close()
		conn.Raw().CloseRead() // wakes a reader blocked on an idle client
	}
	a.liveMu.Unlock()
	a.wg.Wait()
}
