// Package session is the actor of one session: it owns the durable event log
// (one writer), assigns seq, keeps the request-id index, runs at most one run
// at a time and queues the rest, and fans frames out to clients
// (runtime.md P2–P5, L4; interfaces.md "Socket frames").
package session

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/run"
	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/config"
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
	// open or writer is done, so two never append (the
	// chaos test found duplicate seqs and two done frames).
	owner sync.Mutex
	// Epoch and Node are the cluster ownership this session is served
	// under (docs/cluster.md): its log is then segmented, opened at Epoch
	// by Node. Zero in the single daemon. Set before the actor starts.
	Epoch int64
	Node  string
	// Fence, on a cluster owner, reports an error once the node's
	// ownership deadline has passed: every frame is then fsynced and
	// checked against it before a client gets it (docs/cluster.md "The
	// owner's deadline").
	Fence func() error
}

// WaitClosed returns once no incarnation holds the session's log: a
// stopped actor's writer has written what it held and closed the files.
func (k *Keep) WaitClosed() {
	k.owner.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the holder is the point
	k.owner.Unlock()
}

// NewKeep makes an empty Keep.
func NewKeep() *Keep { return &Keep{subs: followers{}} }

type reqInfo struct {
	run, digest string
	done        bool
	// from is where the run's first line is in events.jsonl (-1 before
	// it is committed), to where its done line ends: a replay (P4) reads
	// them from the file, not from memory.
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
	phase   phase         // the table in phase.go
	broken  error         // why, in phase broken
	// exhausted: broken by a full machine (descriptors, disk, memory), not
	// by the log: the next request opens the log again.
	exhausted bool
	seen      *int // requests received by every incarnation of this spawn: passivation asks the parent with it
	replaying bool // onOpened is answering the stash
	stash     []any

	idle idleTimer // passivation's clock

	// Bounded memory while active: the log's lines stay
	// in events.jsonl and are served from there (resume, P4 replay); the
	// actor keeps the request-id index, the newest messages the history
	// window can use, and where the log ends.
	events string // events.jsonl's path
	// src, when set, is the segmented log's chain the ranges are read from
	// instead of events (a cluster owner).
	src      ipc.LogSource
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
	switch a.phase {
	case phaseVacant:
		// Removed: the next request opens a fresh log.
		a.to(phaseOpening)
		a.stash = append(a.stash, m)
		a.open(c)
		return
	case phaseOpening, phaseRemoving:
		a.stash = append(a.stash, m)
		return
	}
	a.onRequest(c, m)
}

// onCrash answers the request whose handling crashed this incarnation
// (a client no longer waits forever for a lost request).
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
	a.phase = phaseOpening // a (re)started incarnation begins here, whatever the last one left
	a.open(c)
}

// onIdle: nothing arrived for SessionIdle. A session with no run, no
// queue and no follower offers to passivate: the parent stops it unless a
// request is on its way, and the next request re-creates it from its log.
func (a *Actor) onIdle(c actor.Context) {
	// The timer stays armed (idleTimer.fired): a session busy when it
	// fired (a run quiet for longer than SessionIdle) passivates at a later
	// tick (found by the chaos test).
	if !a.opened() || a.active != nil || len(a.queue) > 0 || len(a.stash) > 0 {
		return
	}
	if a.keep.subs.any() {
		return
	}
	c.Send(c.Parent(), &Idle{Key: a.key, Seen: *a.seen, PID: c.Self()})
}
