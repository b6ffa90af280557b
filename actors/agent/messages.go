package agent

import (
	"github.com/cortexfs/ctx/ipc"
)

// incoming is a parsed request read by a connection goroutine.
type incoming struct {
	conn *ipc.Conn
	req  *ipc.Request
}

// connClosed is sent by a connection goroutine when its client is gone.
type connClosed struct{ conn *ipc.Conn }

// listenFailed reports that the agent socket could not be served.
type listenFailed struct{ err error }

// relisten asks the actor to try binding its socket again after a failure.
type relisten struct{}

// sessionsFound lists sessions whose log shows a run without done; their
// actors are started at once so the interrupted runs are concluded (L4).
type sessionsFound struct{ keys [][2]string }

// stateSizes asks the actor how many entries its per-session maps hold; it
// answers with a sizes (tests prove nothing grows with passivations).
type stateSizes struct{}

type sizes struct{ sessions, keeps, routed int }
