package client

import "github.com/cortexfs/ctx/ipc"

// Request is one request line of an agent socket (interfaces.md "Socket
// frames"): the daemon's own type, so client and daemon cannot drift.
// Every client builds its requests with the functions below, never as a
// map.
type Request = ipc.Request

// Send asks for a run with input; id makes it idempotent (P4).
func Send(id, session, scope, workspace, input string) Request {
	return Request{Op: ipc.OpSend, ID: id, Session: session, Scope: scope, Workspace: workspace, Input: &input}
}

// Cancel asks to cancel the active run named run of a session.
func Cancel(session, scope, run string) Request {
	return Request{Op: ipc.OpCancel, Session: session, Scope: scope, ID: run}
}

// Approve answers a run's approval request id (A2).
func Approve(run, id, decision string) Request {
	return Request{Op: ipc.OpApprove, Run: run, ID: id, Decision: decision}
}

// Deny is a deny with the person's reason, which reaches the model as the
// call's result.
func Deny(run, id, reason string) Request {
	return Request{Op: ipc.OpApprove, Run: run, ID: id, Decision: ipc.DecisionDeny, Reason: reason}
}

// Resume asks for a session's history, then its active run live (P2).
func Resume(session, scope string) Request {
	return Request{Op: ipc.OpResume, Session: session, Scope: scope}
}

// Remove asks to remove a session.
func Remove(session, scope string) Request {
	return Request{Op: ipc.OpRemove, Session: session, Scope: scope}
}
