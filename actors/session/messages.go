package session

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// Request is one client request for this session (send, tsh, resume,
// cancel, approve), with the connection that sent it.
type Request struct {
	Conn *ipc.Conn
	Req  *ipc.Request
	// Token is set for a cancel that names only a run id and went to every
	// session: the session answers its parent with CancelChecked and stays
	// silent to the client unless the run is its own.
	Token int
}

// CancelChecked answers a broadcast cancel (sent to the parent).
type CancelChecked struct {
	Token int
	Found bool
}

// Drain is the daemon shutting down (interfaces.md "Daemon"): the active
// run is cancelled — its followers see its cancelled and done frames
// before their connections close — and nothing new starts.
type Drain struct{}

// Idle tells the parent this session has had nothing to do for
// config.SessionIdle: no run, no queue, no follower. Seen counts the
// requests it was sent; the parent stops it only when it has routed no
// more than that, so no request is in flight to it.
type Idle struct {
	Key  Key
	Seen int
	PID  *actor.PID
}

// ConnClosed tells the session a client connection is gone.
type ConnClosed struct{ Conn *ipc.Conn }

// internal continuations

// updateAsked is an update on the control socket waiting for the active
// run's person (ask mode); sent by the registry in config.Updates.
type updateAsked struct{ ask *ctlsock.Ask }

type opened struct {
	log   *store.Log
	recs  []store.Record
	err   error
	token *int // the open() that asked; another incarnation's is discarded
}

type committed struct{ rec store.Record }

type appendFailed struct{ err error }

type approvalAnswered struct {
	run, callID, decision string
	reason                string // a deny's, the person's words
	wait                  *ipc.ApprovalWait
	update                *ctlsock.Ask // a control-socket update's, else nil
}

// removed: the removal goroutine finished (err nil: the files are gone).
type removed struct {
	conn *ipc.Conn
	op   string // ipc.OpRemove or ipc.OpRename
	err  error
}
