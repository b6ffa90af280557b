package session

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// Opening a session: its log read, its indexes rebuilt, and a run the log
// shows without done concluded as interrupted — never resumed.

// open opens (creating) the session log on a goroutine; requests wait in
// the stash until it is opened.
func (a *Actor) open(c actor.Context) {
	a.broken = nil
	a.seq, a.end, a.msgs, a.msgsSize = 0, 0, nil, 0
	a.reqs = map[string]*reqInfo{}
	self, root, dir, name, log := c.Self(), c.ActorSystem().Root, a.dir, a.key.Name, a.log
	token, keep := new(int), a.keep
	a.opening = token
	go func() {
		keep.owner.Lock()
		var l *store.Log
		var recs []store.Record
		var err error
		if keep.Epoch > 0 {
			l, recs, err = store.OpenSegmented(dir, keep.Epoch, keep.Node)
			if err == nil {
				l.Fence = keep.Fence
			}
		} else {
			l, recs, err = store.Open(dir)
		}
		if err == nil {
			// terminal/ exists from the start as the host's own directory, so
			// no sandbox (which sees it read-only) can plant files in it first.
			if merr := os.Mkdir(filepath.Join(dir, "terminal"), 0o700); merr != nil && !errors.Is(merr, fs.ErrExist) {
				log.Warn("could not create the terminal resource directory", "err", merr)
			}
			// spec: L4 — interrupted runs are concluded before the first
			// request is served, so a resume never streams a history whose
			// open run has no done.
			if recs, err = concludeInterrupted(l, recs, name, l.PrevOwner(), log); err != nil {
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
	if m.err != nil {
		a.to(phaseBroken)
		a.broken, a.exhausted = m.err, ipc.Exhausted(m.err)
		a.log.Error("session log unusable", "err", m.err, "resource_exhausted", a.exhausted)
	} else {
		a.to(phaseServing)
		a.reqs, a.msgs, a.msgsSize = map[string]*reqInfo{}, nil, 0
		a.seq, a.end = 0, 0
		a.events = filepath.Join(a.dir, store.EventsFile)
		if a.keep.Epoch > 0 {
			a.src = store.ChainSource(a.dir)
		}
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
// lost, on a cluster owner, is the node whose segment precedes this
// owner's: the run was interrupted by that node's loss (interfaces.md
// "Cluster (phase 1)").
func concludeInterrupted(l *store.Log, recs []store.Record, session, lost string, log *slog.Logger) ([]store.Record, error) {
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
		log.Warn("concluding a run interrupted by a daemon crash", "run", r, "lost_node", lost)
		msg := "the daemon stopped while this run was active; it was not resumed"
		if lost != "" {
			msg = "node " + lost + " was lost while this run was active; it was not resumed"
		}
		interrupted := ipc.ErrorFrame(r, ipc.Errorf(ipc.CodeInterrupted, "%s", msg))
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
	return ipc.LogRange{Path: a.events, Src: a.src, From: ri.from, To: to, Run: ri.run}
}
