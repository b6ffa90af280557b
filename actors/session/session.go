// Package session is the actor of one session: it owns the durable event log
// (one writer), assigns seq, keeps the request-id index, runs at most one run
// at a time and queues the rest, and fans frames out to clients
// (runtime.md P2–P5, L4; interfaces.md "Socket frames").
package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/run"
	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/sessions"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// MaxWaiting bounds the sends queued behind an active run.
const MaxWaiting = 16

// Key names a session.
type Key struct{ Agent, Scope, Name string }

// Keep is transport state that outlives a crash of the session actor: the
// clients following each run. Only the actor (any incarnation) touches it.
type Keep struct {
	subs followers
	// owner is held from a log's open to its writer's end: an incarnation
	// restarted after a crash opens the log only once its predecessor's
	// open or writer is done, so two never append (issue 15 item 5: the
	// chaos test found duplicate seqs and two done frames).
	owner sync.Mutex
}

// NewKeep makes an empty Keep.
func NewKeep() *Keep { return &Keep{subs: followers{}} }

type reqInfo struct {
	run, digest string
	done        bool
	// from is where the run's first line is in events.jsonl (-1 before
	// it is committed), to where its done line ends: a replay (P4) reads
	// them from the file, not from memory (issue 15 item 2).
	from, to int64
}

type active struct {
	id, req   string
	spec      run.Spec
	pid       *actor.PID
	conn      *ipc.Conn // the requester: approvals are asked there
	doneSent  bool      // the done frame was handed to the writer
	approvals map[*ipc.ApprovalWait]*time.Timer
	// updates are the approvals asked for control-socket updates; release
	// ends the run's registration in config.Updates.
	updates      map[*ipc.ApprovalWait]*ctlsock.Ask
	updatesAsked int // MaxUpdateAsks bounds it
	release      func()
	// again: connections that sent the run's request again (a client
	// reattaching after it was dropped), newest last; see approver.
	again []*ipc.Conn
}

// reattach records a connection that sent the run's request again.
func (ac *active) reattach(c *ipc.Conn) {
	again := ac.again[:0]
	for _, k := range ac.again {
		if !k.Closed() {
			again = append(again, k)
		}
	}
	if len(again) >= 16 {
		again = again[1:]
	}
	ac.again = append(again, c)
}

// approver is the connection asked the run's approvals: the requester's
// while it is open; once it is gone, the newest one that sent the same
// request again (A2: each approval is answered on the connection that got
// its approval_request; a client dropped for falling behind reattaches
// with the same id, P4). spec: A2
func (ac *active) approver() *ipc.Conn {
	if ac.conn == nil || !ac.conn.Closed() {
		return ac.conn
	}
	for i := len(ac.again) - 1; i >= 0; i-- {
		if !ac.again[i].Closed() {
			return ac.again[i]
		}
	}
	return ac.conn
}

type pending struct {
	req  *ipc.Request
	conn *ipc.Conn
	subs []sub
}

// Actor is one session.
type Actor struct {
	draining bool // the daemon is shutting down: nothing new starts
	cfg      *config.Config
	key      Key
	dir      string
	keep     *Keep
	opening  *int // the token of this incarnation's last open()
	log      *slog.Logger
	// handling is the request this incarnation is processing: a crash
	// (Restarting) answers its client instead of leaving it waiting.
	handling *Request

	in      *frameQueue   // to the writer goroutine; never blocks the actor
	flushed chan struct{} // closed when the writer is done
	ready   bool
	broken  error
	// exhausted: broken by a full machine (descriptors, disk, memory), not
	// by the log: the next request opens the log again (issue 15 item 3).
	exhausted bool
	seen      *int // requests received by every incarnation of this spawn: passivation asks the parent with it
	replaying bool // onOpened is answering the stash
	stash     []any

	// vacant: the session was removed; the next request opens a new log.
	vacant bool

	idle idleTimer // passivation's clock (issue 15 item 1)

	// Bounded memory while active (issue 15 item 2): the log's lines stay
	// in events.jsonl and are served from there (resume, P4 replay); the
	// actor keeps the request-id index, the newest messages the history
	// window can use, and where the log ends.
	events   string          // events.jsonl's path
	seq      int64           // the last committed seq
	end      int64           // where the last committed line ends
	msgs     []store.Message // the conversation's newest messages (messages.jsonl), see trimHistory
	msgsSize int             // their Text and Content bytes
	reqs     map[string]*reqInfo
	active   *active
	queue    []*pending
}

// Receive only dispatches.
func (a *Actor) Receive(c actor.Context) {
	msg := c.Message()
	switch msg.(type) {
	case *idleTick, actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		a.idle.touch()
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.onStarted(c)
	case *opened:
		a.onOpened(c, m)
	case *committed:
		a.onCommitted(c, m.rec)
	case *appendFailed:
		a.onAppendFailed(c, m)
	case *Request:
		a.handling = m
		a.onRequestMsg(c, m)
		a.handling = nil // not reached on a panic: Restarting answers it
	case *removed:
		a.onRemoved(c, m)
	case *Drain:
		a.onDrain(c)
	case *ConnClosed:
		a.onConnClosed(c, m)
	case *run.Emit:
		a.onEmit(c, m)
	case *run.ApprovalNeeded:
		a.onApprovalNeeded(c, m)
	case *approvalAnswered:
		a.onApprovalAnswered(c, m)
	case *updateAsked:
		a.onUpdateAsked(c, m)
	case *actor.Terminated:
		a.onChildGone(c, m)
	case *actor.Restarting:
		a.idle.stop()
		if ac := a.active; ac != nil && ac.release != nil {
			ac.release() // the next incarnation starts without this run
		}
		a.onCrash()
		a.closeWriter(nil)
	case *actor.Stopping:
		a.idle.stop()
		a.onStopping()
	case *idleTick:
		if a.idle.fired(m) {
			a.onIdle(c)
		}
	case *actor.Stopped:
	default:
		a.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) onRequestMsg(c actor.Context, m *Request) {
	*a.seen++
	a.cfg.Hit("session.request")
	if a.vacant {
		// Removed: the next request opens a fresh log.
		a.vacant = false
		a.stash = append(a.stash, m)
		a.open(c)
		return
	}
	if !a.ready {
		a.stash = append(a.stash, m)
		return
	}
	a.onRequest(c, m)
}

// onCrash answers the request whose handling crashed this incarnation
// (issue 15 item 5: a client no longer waits forever for a lost request).
// What was committed before the crash stays in the log: a retry with the
// same id replays it, a new id starts afresh.
func (a *Actor) onCrash() {
	m := a.handling
	a.handling = nil
	if m == nil || m.Conn == nil || m.Token != 0 {
		return
	}
	id := ""
	if m.Req != nil {
		id = m.Req.ID
	}
	a.reply(m.Conn, ipc.CodeInternal, id, "the session failed while handling this request and restarted; send it again (the same id replays whatever was recorded)")
}

func (a *Actor) onStarted(c actor.Context) {
	a.log = a.cfg.Log.With("actor", "session", "agent", a.key.Agent, "scope", a.key.Scope, "session", a.key.Name)
	a.dir = a.cfg.Layout.SessionDir(a.key.Agent, a.key.Scope, a.key.Name)
	a.idle.start(c, a.cfg.SessionIdle)
	a.open(c)
}

// onIdle: nothing arrived for SessionIdle. A session with no run, no
// queue and no follower offers to passivate: the parent stops it unless a
// request is on its way, and the next request re-creates it from its log.
func (a *Actor) onIdle(c actor.Context) {
	// The timer stays armed (idleTimer.fired): a session busy when it
	// fired (a run quiet for longer than SessionIdle) passivates at a later
	// tick (found by the chaos test).
	if !a.ready || a.active != nil || len(a.queue) > 0 || len(a.stash) > 0 {
		return
	}
	if a.keep.subs.any() {
		return
	}
	c.Send(c.Parent(), &Idle{Key: a.key, Seen: *a.seen, PID: c.Self()})
}

// open opens (creating) the session log on a goroutine; requests wait in
// the stash until it is opened.
func (a *Actor) open(c actor.Context) {
	a.ready, a.broken = false, nil
	a.seq, a.end, a.msgs, a.msgsSize = 0, 0, nil, 0
	a.reqs = map[string]*reqInfo{}
	self, root, dir, name, log := c.Self(), c.ActorSystem().Root, a.dir, a.key.Name, a.log
	token, keep := new(int), a.keep
	a.opening = token
	go func() {
		keep.owner.Lock()
		l, recs, err := store.Open(dir)
		if err == nil {
			// terminal/ exists from the start as the host's own directory, so
			// no sandbox (which sees it read-only) can plant files in it first.
			if merr := os.Mkdir(filepath.Join(dir, "terminal"), 0o700); merr != nil && !errors.Is(merr, fs.ErrExist) {
				log.Warn("could not create the terminal resource directory", "err", merr)
			}
			// spec: L4 — interrupted runs are concluded before the first
			// request is served, so a resume never streams a history whose
			// open run has no done.
			if recs, err = concludeInterrupted(l, recs, name, log); err != nil {
				l.Close()
			}
		}
		if err != nil {
			keep.owner.Unlock()
		}
		root.Send(self, &opened{log: l, recs: recs, err: err, token: token})
	}()
}

func (a *Actor) onOpened(c actor.Context, m *opened) {
	if m.token != a.opening {
		// A crashed incarnation's open: its log is not ours to write.
		if m.err == nil {
			m.log.Close()
			a.keep.owner.Unlock()
		}
		return
	}
	a.ready = true
	if m.err != nil {
		a.broken, a.exhausted = m.err, ipc.Exhausted(m.err)
		a.log.Error("session log unusable", "err", m.err, "resource_exhausted", a.exhausted)
	} else {
		a.reqs, a.msgs, a.msgsSize = map[string]*reqInfo{}, nil, 0
		a.seq, a.end = 0, 0
		a.events = filepath.Join(a.dir, store.EventsFile)
		a.in = newFrameQueue()
		a.flushed = make(chan struct{})
		keep := a.keep
		go func(l *store.Log, in *frameQueue, flushed chan<- struct{}, root *actor.RootContext, self *actor.PID) {
			defer keep.owner.Unlock()
			writer(l, in, flushed, root, self)
		}(m.log, a.in, a.flushed, c.ActorSystem().Root, c.Self())
		a.recover(m.recs)
		// Clients that followed a run of a crashed incarnation get its
		// host-written conclusion (the log now ends it).
		for _, run := range a.keep.subs.runs() {
			if ri := a.reqsByRun(run); ri != nil && ri.done {
				if lines := lastLines(m.recs, run, 2); len(lines) == 2 {
					a.keep.subs.sendBatch(run, lines)
				}
				a.keep.subs.drop(run)
			}
		}
	}
	stash := a.stash
	a.stash = nil
	a.replaying = true
	for _, r := range stash {
		a.onRequest(c, r.(*Request))
	}
	a.replaying = false
}

// brokenCode is the wire code of a session that cannot serve.
func (a *Actor) brokenCode() string {
	if a.exhausted {
		return ipc.CodeResourceExhausted
	}
	return ipc.CodeSessionCorrupt
}

// recover rebuilds the request-id index and the history from the log's
// records, which are not kept.
func (a *Actor) recover(recs []store.Record) {
	for i := range recs {
		a.index(&recs[i])
	}
}

// lastLines returns the last n stored lines of one run in recs.
func lastLines(recs []store.Record, run string, n int) [][]byte {
	var out [][]byte
	for i := len(recs) - 1; i >= 0 && len(out) < n; i-- {
		if recs[i].Frame.Run == run {
			out = append(out, recs[i].Line)
		}
	}
	slices.Reverse(out)
	return out
}

// concludeInterrupted appends a host error + done for every run the log
// shows without done (a crash or SIGKILL) and returns the records with them.
// It runs on the opening goroutine, which owns l until opened is sent (L4).
func concludeInterrupted(l *store.Log, recs []store.Record, session string, log *slog.Logger) ([]store.Record, error) {
	open := map[string]string{} // run -> request id
	var order []string
	for i := range recs {
		f := &recs[i].Frame
		if f.Run == "" {
			continue
		}
		switch f.Type {
		case ipc.TypeDone:
			delete(open, f.Run)
		case ipc.TypeUser, ipc.TypeStart:
			if _, ok := open[f.Run]; !ok {
				order = append(order, f.Run)
			}
			open[f.Run] = f.ID
		}
	}
	for _, r := range order {
		id, ok := open[r]
		if !ok {
			continue
		}
		log.Warn("concluding a run interrupted by a daemon crash", "run", r)
		interrupted := ipc.ErrorFrame(r, ipc.Errorf(ipc.CodeInterrupted, "the daemon stopped while this run was active; it was not resumed"))
		interrupted.Session = session
		for _, f := range []ipc.Frame{
			*interrupted,
			{Type: ipc.TypeDone, Session: session, Run: r, ID: id, Status: ipc.StatusError},
		} {
			rec, err := l.Append(f)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

func (a *Actor) reqsByRun(run string) *reqInfo {
	for _, ri := range a.reqs {
		if ri.run == run {
			return ri
		}
	}
	return nil
}

// index takes in one committed record: the log's end, the request-id
// index with where each run's lines are, and the conversation.
func (a *Actor) index(rec *store.Record) {
	f := &rec.Frame
	a.seq, a.end = f.Seq, rec.End()
	if m := store.MessageOf(f); m != nil {
		a.addMessage(*m) // the conversation, kept as it commits
	}
	switch f.Type {
	case ipc.TypeUser, ipc.TypeStart:
		ri := a.reqs[f.ID]
		if ri == nil && f.ID != "" {
			ri = &reqInfo{run: f.Run, digest: f.Digest, from: -1}
			a.reqs[f.ID] = ri
		}
		if ri != nil && ri.run == f.Run && ri.from < 0 {
			ri.from = rec.Off
		}
	case ipc.TypeDone:
		if ri := a.reqs[f.ID]; ri != nil && ri.run == f.Run {
			ri.done, ri.to = true, rec.End()
		}
	}
}

// runLog is where the stored lines of the run of ri are: its own lines in
// events.jsonl from its first to its done (or, while it runs, to the
// log's committed end).
func (a *Actor) runLog(ri *reqInfo) ipc.LogRange {
	if ri.from < 0 {
		return ipc.LogRange{} // nothing committed yet
	}
	to := a.end
	if ri.done {
		to = ri.to
	}
	return ipc.LogRange{Path: a.events, From: ri.from, To: to, Run: ri.run}
}

func (a *Actor) onRequest(c actor.Context, m *Request) {
	switch m.Req.Op {
	case ipc.OpRemove: // a corrupt log can be removed too
		a.onRemove(c, m)
		return
	}
	if a.broken != nil {
		if a.exhausted && !a.replaying {
			// issue 15 item 3: a full machine is not a corrupt session; the
			// files are untouched, so try again (a torn last line from a
			// failed append is repaired on open).
			a.broken, a.exhausted, a.ready = nil, false, false
			a.stash = append(a.stash, m)
			a.open(c)
			return
		}
		a.reply(m.Conn, a.brokenCode(), m.Req.ID, a.broken.Error())
		return
	}
	switch m.Req.Op {
	case ipc.OpSend, ipc.OpTsh:
		a.onSend(c, m)
	case ipc.OpResume:
		a.onResume(m)
	case ipc.OpCancel:
		a.onCancel(c, m)
	default:
		m.Conn.SendFrame(ipc.ErrorFrame("", ipc.Errorf(ipc.CodeBadRequest, "op %s is not a session op", m.Req.Op)))
	}
}

// reply answers one request of conn with an error frame for this session.
func (a *Actor) reply(conn *ipc.Conn, code, id, msg string) {
	f := ipc.ErrorFrame("", ipc.Errorf(code, "%s", msg))
	f.Session, f.ID = a.key.Name, id
	conn.SendFrame(f)
}

// onSend: P4 replay, id_conflict, queueing, or a new run.
func (a *Actor) onSend(c actor.Context, m *Request) {
	req, digest := m.Req, m.Req.Digest()
	if ri := a.reqs[req.ID]; ri != nil {
		if ri.digest != digest {
			a.reply(m.Conn, ipc.CodeIDConflict, req.ID, fmt.Sprintf("request id %q was used for a different request in this session", req.ID))
			return
		}
		// spec: P4 — replay the durable frames; never run twice.
		m.Conn.SendLog(a.runLog(ri), true)
		if !ri.done {
			a.keep.subs.add(ri.run, sub{conn: m.Conn, replay: true})
			if ac := a.active; ac != nil && ac.id == ri.run {
				ac.reattach(m.Conn)
			}
		}
		return
	}
	for _, p := range a.queue {
		if p.req.ID == req.ID {
			if p.req.Digest() != digest {
				a.reply(m.Conn, ipc.CodeIDConflict, req.ID, fmt.Sprintf("request id %q is queued with a different request", req.ID))
				return
			}
			p.subs = append(p.subs, sub{conn: m.Conn, replay: true})
			return
		}
	}
	if a.draining {
		a.reply(m.Conn, ipc.CodeShuttingDown, req.ID, "the daemon is shutting down; nothing was recorded — send again once it is back")
		return
	}
	if a.active != nil || len(a.queue) > 0 {
		if len(a.queue) >= MaxWaiting {
			a.reply(m.Conn, ipc.CodeBusy, req.ID, fmt.Sprintf("session %s has a run active and %d requests waiting", a.key.Name, MaxWaiting))
			return
		}
		a.queue = append(a.queue, &pending{req: req, conn: m.Conn, subs: []sub{{conn: m.Conn}}})
		return
	}
	a.start(c, &pending{req: req, conn: m.Conn, subs: []sub{{conn: m.Conn}}})
}

func (a *Actor) start(c actor.Context, p *pending) {
	req := p.req
	id := newRunID(a.seq)
	a.reqs[req.ID] = &reqInfo{run: id, digest: req.Digest(), from: -1}
	a.keep.subs.add(id, p.subs...)
	input := ""
	if req.Input != nil {
		input = *req.Input
	}
	a.setActive(&active{id: id, req: req.ID, conn: p.conn, approvals: map[*ipc.ApprovalWait]*time.Timer{}, updates: map[*ipc.ApprovalWait]*ctlsock.Ask{}})
	// The control socket asks this session to approve the run's updates
	// (ask mode); the message returns to the actor, never blocking it.
	self, root := c.Self(), c.ActorSystem().Root
	a.active.release = a.cfg.Updates.Register(a.key.Agent, a.key.Name, id, func(k *ctlsock.Ask) { root.Send(self, &updateAsked{ask: k}) })
	a.active.spec = run.Spec{Agent: a.key.Agent, RunID: id, ReqID: req.ID, Op: req.Op, Session: a.key.Name, Scope: a.key.Scope,
		Input: input, Args: req.Args, Workspace: req.Workspace, Cwd: req.Cwd, History: historyJSON(a.msgs), HistoryMsgs: promptHistory(a.msgs),
		Attempts: &atomic.Int32{}}
	a.active.spec.Digest = req.Digest()
	if req.Op == ipc.OpSend {
		// spec: P5 — the user message is durable before anything runs: the
		// run actor is spawned when this frame is committed.
		a.append(ipc.Frame{Type: ipc.TypeUser, Run: id, ID: req.ID, Text: input, Digest: req.Digest()})
		return
	}
	a.spawnRun(c)
}

// spawnRun starts the active run's actor; it writes the start frame itself
// once it has read the definition (so start can carry the prompt hash).
func (a *Actor) spawnRun(c actor.Context) {
	ac := a.active
	pid, err := c.SpawnNamed(run.Props(a.cfg, ac.spec), ac.id)
	if err != nil {
		a.log.Error("spawn run", "err", err)
		ac.doneSent = true
		a.append(*ipc.ErrorFrame(ac.id, ipc.Errorf(ipc.CodeInternal, "could not start the run: %v", err)))
		a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: ipc.StatusError})
		return
	}
	ac.pid = pid
}

func newRunID(seq int64) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "run-" + strconv.FormatInt(seq+1, 10) + "-" + hex.EncodeToString(b[:])
}

// onResume streams the whole committed log from events.jsonl — served by
// the connection's writer, not held by the actor (issue 15 item 2) — then
// caught_up, then the active run's frames as they commit.
func (a *Actor) onResume(m *Request) {
	m.Conn.SendLog(ipc.LogRange{Path: a.events, From: 0, To: a.end}, false)
	var ar *string
	if a.active != nil {
		id := a.active.id
		ar = &id
		a.keep.subs.add(id, sub{conn: m.Conn})
	}
	m.Conn.SendFrame(&ipc.Frame{Type: ipc.TypeCaughtUp, Session: a.key.Name, ActiveRun: ar})
}

// onRemove: an idle session closes its log and its directory is archived
// then deleted (sessions.Remove) on a goroutine; requests arriving
// meanwhile wait in the stash and are served by a fresh log. A session
// with an active or queued run answers busy and nothing changes.
// issue 18 item 1
func (a *Actor) onRemove(c actor.Context, m *Request) {
	if a.active != nil || len(a.queue) > 0 {
		msg := "session " + a.key.Name + " has runs waiting"
		if a.active != nil {
			msg = "session " + a.key.Name + " has an active run " + a.active.id + "; cancel it first"
		}
		a.reply(m.Conn, ipc.CodeBusy, m.Req.ID, msg)
		return
	}
	a.ready = false
	in, flushed := a.in, a.flushed
	a.in = nil
	if in != nil {
		in.close() // the writer writes what it holds, closes the files, then closes flushed
	}
	self, root, l, key, conn := c.Self(), c.ActorSystem().Root, a.cfg.Layout, a.key, m.Conn
	go func() {
		if flushed != nil {
			<-flushed
		}
		root.Send(self, &removed{conn: conn, err: sessions.Remove(l, key.Agent, key.Scope, key.Name)})
	}()
}

func (a *Actor) onRemoved(c actor.Context, m *removed) {
	if m.err != nil {
		a.log.Error("session removal failed; reopening it", "err", m.err)
		code := ipc.CodeInternal
		if errors.Is(m.err, sessions.ErrNotFound) {
			code = ipc.CodeNotFound
		}
		a.reply(m.conn, code, "", m.err.Error())
		a.open(c)
		return
	}
	a.log.Info("session removed")
	a.seq, a.end, a.msgs, a.msgsSize, a.reqs = 0, 0, nil, 0, map[string]*reqInfo{}
	a.keep.subs.dropAll()
	m.conn.SendFrame(&ipc.Frame{Type: ipc.TypeAck, Session: a.key.Name, Op: ipc.OpRemove})
	if len(a.stash) > 0 {
		a.open(c) // requests that came during the removal start the new log
		return
	}
	a.vacant = true
}

func (a *Actor) onCancel(c actor.Context, m *Request) {
	ac := a.active
	found := ac != nil && (m.Req.ID == "" || m.Req.ID == ac.id) && !ac.doneSent
	if m.Token != 0 {
		c.Send(c.Parent(), &CancelChecked{Token: m.Token, Found: found})
	}
	if !found {
		if m.Token == 0 {
			a.reply(m.Conn, ipc.CodeNotFound, m.Req.ID, "no such active run in session "+a.key.Name)
		}
		return
	}
	m.Conn.SendFrame(&ipc.Frame{Type: ipc.TypeAck, Session: a.key.Name, Op: ipc.OpCancel, Run: ac.id})
	if ac.pid != nil {
		c.Send(ac.pid, &run.Cancel{})
		return
	}
	// Not yet spawned: the host concludes it here.
	ac.doneSent = true
	a.append(ipc.Frame{Type: ipc.TypeCancelled, Run: ac.id})
	a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: ipc.StatusCancelled})
}

// onEmit appends a frame of the active run. Frames of any other run, or
// after its done, are dropped (X12).
func (a *Actor) onEmit(c actor.Context, m *run.Emit) {
	ac := a.active
	if ac == nil || ac.pid == nil || c.Sender() == nil || !c.Sender().Equal(ac.pid) || m.Frame.Run != ac.id || ac.doneSent {
		if m.Frame.Type != ipc.TypeDone {
			a.log.Debug("dropped a frame of an inactive run", "run", m.Frame.Run, "type", m.Frame.Type)
		}
		return
	}
	if m.Frame.Type == ipc.TypeDone {
		ac.doneSent = true
	}
	a.append(*m.Frame)
}

func (a *Actor) onCommitted(c actor.Context, rec store.Record) {
	a.index(&rec)
	f := &rec.Frame
	a.keep.subs.send(f.Run, rec.Line)
	ac := a.active
	if ac == nil || f.Run != ac.id {
		if f.Type == ipc.TypeDone {
			a.keep.subs.drop(f.Run)
		}
		return
	}
	switch f.Type {
	case ipc.TypeUser:
		if ac.pid == nil && !ac.doneSent && a.draining {
			// Recorded just before the shutdown began: it ends cancelled, unrun.
			ac.doneSent = true
			a.append(ipc.Frame{Type: ipc.TypeCancelled, Run: ac.id})
			a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: ipc.StatusCancelled})
		} else if ac.pid == nil && !ac.doneSent {
			a.spawnRun(c)
		}
	case ipc.TypeDone:
		a.keep.subs.drop(f.Run)
		for _, k := range ac.updates {
			k.Answer("eof") // the run is over: its update is not written
		}
		for w, t := range ac.approvals {
			t.Stop()
			for _, k := range append([]*ipc.Conn{ac.conn}, ac.again...) { // whichever was asked
				if k != nil {
					k.CancelApproval(w)
				}
			}
		}
		if ac.pid != nil {
			c.Send(ac.pid, &run.Concluded{}) // spec: X12
		}
		a.setActive(nil)
		a.next(c)
	}
}

func (a *Actor) next(c actor.Context) {
	for len(a.queue) > 0 && a.active == nil {
		p := a.queue[0]
		a.queue = a.queue[1:]
		a.start(c, p)
	}
}

func (a *Actor) onAppendFailed(c actor.Context, m *appendFailed) {
	// A log that cannot be written cannot record anything: stop serving.
	if a.broken != nil {
		return // already stopped serving
	}
	a.log.Error("session append failed", "err", m.err)
	a.broken, a.exhausted = m.err, ipc.Exhausted(m.err)
	msg := "session log write failed; nothing more is recorded here: " + m.err.Error()
	if a.exhausted {
		msg = "the machine is out of resources; the session's log is intact and the next request tries again: " + m.err.Error()
	}
	a.keep.subs.each(func(s sub) { a.reply(s.conn, a.brokenCode(), "", msg) })
	a.keep.subs.dropAll()
	for _, p := range a.queue {
		for _, s := range p.subs {
			a.reply(s.conn, a.brokenCode(), p.req.ID, msg)
		}
	}
	a.queue = nil
	if a.active != nil && a.active.pid != nil {
		c.Stop(a.active.pid)
	}
	a.setActive(nil)
	a.closeWriter(nil) // the log refuses every later append anyway
}

// onChildGone: a run actor that stopped before its done was durable is
// concluded by the host as interrupted.
func (a *Actor) onChildGone(c actor.Context, m *actor.Terminated) {
	ac := a.active
	if ac == nil || ac.pid == nil || !ac.pid.Equal(m.Who) || ac.doneSent || a.broken != nil {
		return
	}
	ac.doneSent = true
	a.append(*ipc.ErrorFrame(ac.id, ipc.Errorf(ipc.CodeInterrupted, "the run stopped inside the runtime before it concluded; it was not retried")))
	a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: ipc.StatusError})
}

func (a *Actor) onConnClosed(c actor.Context, m *ConnClosed) {
	a.keep.subs.dropConn(m.Conn)
	q := a.queue[:0]
	for _, p := range a.queue {
		p.subs = without(p.subs, m.Conn)
		if p.conn == m.Conn && len(p.subs) == 0 {
			continue // nothing was recorded: the request simply never happened
		}
		q = append(q, p)
	}
	a.queue = q
	if w := m.Conn.TakeApproval(); w != nil {
		w.Answer("eof") // spec: A3 — EOF fails closed
	}
}

func (a *Actor) onStopping() {
	if ac := a.active; ac != nil && ac.release != nil {
		ac.release() // this incarnation can no longer ask
	}
	if ac := a.active; ac != nil && !ac.doneSent && a.in != nil {
		ac.doneSent = true
		if a.draining {
			// The drain's grace ran out before the run concluded: the host
			// concludes it cancelled, as the shutdown asked (issue 16 item 11).
			a.append(ipc.Frame{Type: ipc.TypeCancelled, Run: ac.id})
			a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: ipc.StatusCancelled})
		} else {
			// Not a shutdown: the agent actor above crashed (or the
			// definition went). Concluded like any run the runtime lost.
			// issue 15 item 5
			a.append(*ipc.ErrorFrame(ac.id, ipc.Errorf(ipc.CodeInterrupted, "the run stopped inside the runtime before it concluded; it was not retried")))
			a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: "error"})
		}
	}
	a.setActive(nil)
	a.closeWriter(nil)
	if a.cfg.MCP != nil {
		// issue 13: the session's MCP servers stop with it (idle session
		// or shutdown); StopSession does not wait.
		a.cfg.MCP.StopSession(a.key.Agent, a.key.Scope, a.key.Name)
	}
}

// onDrain: the daemon is shutting down. Waiting requests never started
// (nothing of them was recorded) and are told so; the active run is
// cancelled like a client's cancel (SIGTERM, the grace, SIGKILL), so its
// followers get its cancelled and done. issue 16 item 11
func (a *Actor) onDrain(c actor.Context) {
	a.draining = true
	for _, p := range a.queue {
		for _, s := range p.subs {
			a.reply(s.conn, ipc.CodeShuttingDown, p.req.ID, "the daemon is shutting down; this request was not started and nothing was recorded")
		}
	}
	a.queue = nil
	if ac := a.active; ac != nil && !ac.doneSent && ac.pid != nil {
		c.Send(ac.pid, &run.Cancel{})
	}
}

// setActive changes the active run and keeps the daemon's count of
// running runs (cfg.Running) in step with it.
func (a *Actor) setActive(ac *active) {
	switch {
	case a.cfg.Running == nil: // a config built by hand (tests)
	case a.active == nil && ac != nil:
		a.cfg.Running.Add(1)
	case a.active != nil && ac == nil:
		a.cfg.Running.Add(-1)
	}
	if a.active != nil && a.active != ac && a.active.release != nil {
		a.active.release()
	}
	a.active = ac
}

// closeWriter stops the writer after it has written what it holds (bounded wait).
func (a *Actor) closeWriter(_ error) {
	if a.in == nil {
		return
	}
	a.in.close()
	select {
	case <-a.flushed:
	case <-time.After(5 * time.Second):
		a.log.Error("session writer did not finish in 5s")
	}
	a.in = nil
}

// append hands a frame to the writer; with no writer (a broken log) it is dropped.
func (a *Actor) append(f ipc.Frame) {
	f.Session = a.key.Name
	if a.in != nil {
		a.in.push(f)
	}
}
