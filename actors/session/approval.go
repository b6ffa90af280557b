package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/run"
	"github.com/cortexfs/ctx/ipc"
)

// onApprovalNeeded emits one bounded approval_request on the requesting
// connection and makes the next line read there its answer (A2). No
// requester connection means no one can approve: it fails closed as eof.
func (a *Actor) onApprovalNeeded(c actor.Context, m *run.ApprovalNeeded) {
	ac := a.active
	if ac == nil || ac.id != m.Run || ac.doneSent || ac.pid == nil {
		return
	}
	self, root := c.Self(), c.ActorSystem().Root
	w := &ipc.ApprovalWait{Run: m.Run, ID: m.CallID}
	w.Answer = func(decision string) {
		root.Send(self, &approvalAnswered{run: m.Run, callID: m.CallID, decision: decision, wait: w})
	}
	a.append(ipc.Frame{Type: ipc.TypeApprovalRequest, Run: m.Run, ID: m.CallID, Name: m.Name, Args: m.Args, MCP: m.MCP,
		TimeoutMS: a.cfg.ApprovalTimeout.Milliseconds()})
	conn := ac.approver()
	if conn != ac.conn && conn != nil {
		// A reattached client stands in for the requester: it is sent the
		// run's frames as live ones from here on, this approval_request
		// included, so it answers it (a replayed one is never answered).
		a.keep.subs.live(m.Run, conn)
	}
	if conn == nil || !conn.ExpectApproval(w) {
		a.onApprovalAnswered(c, &approvalAnswered{run: m.Run, callID: m.CallID, decision: "eof", wait: w})
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
		return
	}
	if t, ok := ac.approvals[m.wait]; ok {
		t.Stop()
		delete(ac.approvals, m.wait)
	}
	a.append(ipc.Frame{Type: ipc.TypeApproval, Run: m.run, ID: m.callID, Decision: m.decision})
	c.Send(ac.pid, &run.ApprovalAnswer{CallID: m.callID, Decision: m.decision})
}
