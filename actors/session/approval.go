package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/run"
	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/ipc"
)

// onApprovalNeeded emits one bounded approval_request on the requesting
// connection and makes the next line read there its answer (A2). No
// requester connection means no one can approve: it fails closed as eof.
func (a *Actor) onApprovalNeeded(c actor.Context, m *run.ApprovalNeeded) {
	a.askApproval(c, &ipc.Frame{Type: ipc.TypeApprovalRequest, Run: m.Run, ID: m.CallID, Name: m.Name, Args: m.Args, MCP: m.MCP}, nil)
}

// MaxUpdateAsks bounds the control-socket updates one run may have its
// person asked about, as X6 bounds its tool calls (8).
const MaxUpdateAsks = 8

// onUpdateAsked asks the run's person about an update that arrived on
// the control socket (ask mode), exactly as about a tool call: the same
// approval_request on the same connection, recorded, failing closed. The
// answer goes back to the control socket, not to the run actor. An update
// of a run that is not this session's active one has no one to ask: eof.
// spec: A2, A3
func (a *Actor) onUpdateAsked(c actor.Context, m *updateAsked) {
	k := m.ask
	ac := a.active
	if ac == nil || ac.id != k.Run || ac.doneSent || ac.pid == nil {
		k.Answer("eof")
		return
	}
	if ac.updatesAsked >= MaxUpdateAsks {
		// Each question is two recorded frames of up to 8 KiB: a run that
		// keeps asking (its person gone, every answer an instant eof)
		// would grow the log without bound. Refused unrecorded, unasked.
		a.log.Warn("control socket update refused unasked: too many in this run", "run", k.Run, "limit", MaxUpdateAsks)
		k.Answer("limit")
		return
	}
	ac.updatesAsked++
	a.askApproval(c, &ipc.Frame{Type: ipc.TypeApprovalRequest, Run: k.Run, ID: k.ID, Name: ctlsock.ToolName,
		Args: []string{"--control", k.Control, "--content", k.Content}}, k)
}

// askApproval appends req (an approval_request of the active run) and
// waits for its answer on the approver connection; update is set for a
// control-socket update.
func (a *Actor) askApproval(c actor.Context, req *ipc.Frame, update *ctlsock.Ask) {
	ac := a.active
	if ac == nil || ac.id != req.Run || ac.doneSent || ac.pid == nil {
		if update != nil {
			update.Answer("eof")
		}
		return
	}
	self, root := c.Self(), c.ActorSystem().Root
	w := &ipc.ApprovalWait{Run: req.Run, ID: req.ID}
	w.Answer = func(decision string) {
		root.Send(self, &approvalAnswered{run: req.Run, callID: req.ID, decision: decision, reason: w.Reason, wait: w, update: update})
	}
	req.TimeoutMS = a.cfg.ApprovalTimeout.Milliseconds()
	a.append(*req)
	if update != nil {
		ac.updates[w] = update
	}
	conn := ac.approver()
	if conn != ac.conn && conn != nil {
		// A reattached client stands in for the requester: it is sent the
		// run's frames as live ones from here on, this approval_request
		// included, so it answers it (a replayed one is never answered).
		a.keep.subs.live(req.Run, conn)
	}
	if conn == nil || !conn.ExpectApproval(w) {
		a.onApprovalAnswered(c, &approvalAnswered{run: req.Run, callID: req.ID, decision: "eof", wait: w, update: update})
		return
	}
	ac.approvals[w] = time.AfterFunc(a.cfg.ApprovalTimeout, func() {
		if conn.CancelApproval(w) {
			w.Answer("timeout") // spec: A3 — timeout fails closed
		}
	})
}

func (a *Actor) onApprovalAnswered(c actor.Context, m *approvalAnswered) {
	ac := a.active
	if ac == nil || ac.id != m.run || ac.doneSent || ac.pid == nil {
		if m.update != nil {
			m.update.Answer("eof") // the run is over: nothing is written
		}
		return
	}
	if t, ok := ac.approvals[m.wait]; ok {
		t.Stop()
		delete(ac.approvals, m.wait)
	}
	delete(ac.updates, m.wait)
	reason := ""
	if m.decision == ipc.DecisionDeny {
		reason = m.reason
	}
	a.append(ipc.Frame{Type: ipc.TypeApproval, Run: m.run, ID: m.callID, Decision: m.decision, Reason: reason})
	if m.update != nil {
		// Recorded first: the control socket writes only after this.
		m.update.Answer(m.decision)
		return
	}
	c.Send(ac.pid, &run.ApprovalAnswer{CallID: m.callID, Decision: m.decision, Reason: reason})
}
