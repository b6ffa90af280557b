package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cortexfs/ctx/actors/run"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// A run's frames committed to the log, then sent to followers; how the
// log failing, a run stopping and the daemon draining end things.

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
	if a.phase == phaseServing {
		a.to(phaseBroken) // removing stays removing: the log goes anyway
	}
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
			// concludes it cancelled, as the shutdown asked.
			a.append(ipc.Frame{Type: ipc.TypeCancelled, Run: ac.id})
			a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: ipc.StatusCancelled})
		} else {
			// Not a shutdown: the agent actor above crashed (or the
			// definition went). Concluded like any run the runtime lost.
			a.append(*ipc.ErrorFrame(ac.id, ipc.Errorf(ipc.CodeInterrupted, "the run stopped inside the runtime before it concluded; it was not retried")))
			a.append(ipc.Frame{Type: ipc.TypeDone, Run: ac.id, ID: ac.req, Status: "error"})
		}
	}
	a.setActive(nil)
	a.closeWriter(nil)
	if a.cfg.MCP != nil {
		// The session's MCP servers stop with it (idle session
		// or shutdown); StopSession does not wait.
		a.cfg.MCP.StopSession(a.key.Agent, a.key.Scope, a.key.Name)
	}
}

// onDrain: the daemon is shutting down. Waiting requests never started
// (nothing of them was recorded) and are told so; the active run is
// cancelled like a client's cancel (SIGTERM, the grace, SIGKILL), so its
// followers get its cancelled and done.
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
