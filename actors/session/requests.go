package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cortexfs/ctx/actors/run"
	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sessions"
	"github.com/cortexfs/ctx/ipc"
)

// The requests a session answers: send (one active run, the rest queued
// or busy), resume, remove, cancel.

func (a *Actor) onRequest(c actor.Context, m *Request) {
	switch m.Req.Op {
	case ipc.OpRemove: // a corrupt log can be removed too
		a.onRemove(c, m)
		return
	case ipc.OpRename:
		a.onRemove(c, m) // the same closing; the directory is renamed
		return
	}
	if a.phase == phaseBroken {
		if a.exhausted && !a.replaying {
			// A full machine is not a corrupt session; the
			// files are untouched, so try again (a torn last line from a
			// failed append is repaired on open).
			a.broken, a.exhausted = nil, false
			a.to(phaseOpening)
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
		Input: input, Images: req.Images, Args: req.Args, Workspace: req.Workspace, Cwd: req.Cwd,
		Attempts: &atomic.Int32{}}
	if req.Op == ipc.OpSend {
		// Only an agent's steps read the history (its envelope, its
		// prompt); a tsh op runs one call. Rendering it is a marshal of up
		// to MaxHistory on this actor: most of a warm tsh op's daemon CPU
		// in a long session.
		a.active.spec.History, a.active.spec.HistoryMsgs = historyJSON(a.msgs), promptHistory(a.msgs)
	}
	a.active.spec.Digest = req.Digest()
	if req.Op == ipc.OpSend {
		// spec: P5 — the user message is durable before anything runs: the
		// run actor is spawned when this frame is committed.
		a.append(ipc.Frame{Type: ipc.TypeUser, Run: id, ID: req.ID, Text: input, Images: req.Images, Digest: req.Digest()})
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
// the connection's writer, not held by the actor — then
// caught_up, then the active run's frames as they commit.
func (a *Actor) onResume(m *Request) {
	m.Conn.SendLog(ipc.LogRange{Path: a.events, Src: a.src, From: 0, To: a.end}, false)
	var ar *string
	if a.active != nil {
		id := a.active.id
		ar = &id
		a.keep.subs.add(id, sub{conn: m.Conn})
	}
	m.Conn.SendFrame(&ipc.Frame{Type: ipc.TypeCaughtUp, Session: a.key.Name, ActiveRun: ar})
}

// onRemove (remove and rename): an idle session closes its log and its
// directory is archived then deleted (sessions.Remove) or renamed, never
// over another session (sessions.Rename), on a goroutine; requests
// arriving meanwhile wait in the stash and are served by a fresh log under
// this name. A session with an active or queued run answers busy and
// nothing changes; a failed rename reopens the log where it was.
func (a *Actor) onRemove(c actor.Context, m *Request) {
	if a.active != nil || len(a.queue) > 0 {
		msg := "session " + a.key.Name + " has runs waiting"
		if a.active != nil {
			msg = "session " + a.key.Name + " has an active run " + a.active.id + "; cancel it first"
		}
		a.reply(m.Conn, ipc.CodeBusy, m.Req.ID, msg)
		return
	}
	a.to(phaseRemoving)
	in, flushed := a.in, a.flushed
	a.in = nil
	if in != nil {
		in.close() // the writer writes what it holds, closes the files, then closes flushed
	}
	self, root, l, key, conn, req := c.Self(), c.ActorSystem().Root, a.cfg.Layout, a.key, m.Conn, m.Req
	go func() {
		if flushed != nil {
			<-flushed
		}
		if req.Op == ipc.OpRename {
			root.Send(self, &removed{conn: conn, op: req.Op, err: sessions.Rename(l, key.Agent, key.Scope, key.Name, req.Args[0])})
			return
		}
		root.Send(self, &removed{conn: conn, op: ipc.OpRemove, err: sessions.Remove(l, key.Agent, key.Scope, key.Name)})
	}()
}

func (a *Actor) onRemoved(c actor.Context, m *removed) {
	if m.err != nil {
		a.log.Error("session "+m.op+" failed; reopening it", "err", m.err)
		code := ipc.CodeInternal
		switch {
		case errors.Is(m.err, sessions.ErrNotFound):
			code = ipc.CodeNotFound
		case errors.Is(m.err, sessions.ErrExists), errors.Is(m.err, layout.ErrBadName):
			code = ipc.CodeBadRequest
		}
		a.reply(m.conn, code, "", m.err.Error())
		a.to(phaseOpening)
		a.open(c)
		return
	}
	a.log.Info("session "+m.op+"d", "op", m.op)
	a.seq, a.end, a.msgs, a.msgsSize, a.reqs = 0, 0, nil, 0, map[string]*reqInfo{}
	a.keep.subs.dropAll()
	m.conn.SendFrame(&ipc.Frame{Type: ipc.TypeAck, Session: a.key.Name, Op: m.op})
	if len(a.stash) > 0 {
		a.to(phaseOpening)
		a.open(c) // requests that came during the removal start the new log
		return
	}
	a.to(phaseVacant)
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
