package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/ipc"
)

// updateGate brings the agent's policy and approval mode to the control
// socket (README "Self-iteration"): an update is a way to do what the
// agent.update tool does, so it is refused where that tool is, and in
// ask mode the person who started the run is asked, as for a call.
type updateGate struct {
	layout          layout.Layout
	approvalTimeout time.Duration
	updates         *ctlsock.Approvers
}

var _ ctlsock.Gate = updateGate{}

func (g updateGate) Admit(ctx context.Context, id launchroot.Identity, req ctlsock.Request) error {
	// The definition as it is now: a policy or approval mode changed since
	// the sandbox started applies to its next update. An invalid one
	// refuses (runs of it fail closed too).
	def, err := agentdef.Load(g.layout, id.Agent)
	if err != nil {
		return fmt.Errorf("%w: definition unusable: %v", ctlsock.ErrDenied, err)
	}
	// spec: V3 — the same verdict as a call of agent.update (and as the
	// view, which leaves the socket out where it refuses).
	if d := sandbox.DecideUpdate(g.layout, def); !d.Allowed {
		return fmt.Errorf("%w by %s: %s", ctlsock.ErrDenied, d.Layer, d.Reason)
	}
	if def.Approval != "ask" {
		return nil
	}
	// spec: A2, A3 — one approval_request on the requester's connection,
	// recorded; only allow_once writes. The session times the question
	// out itself; this bound only keeps a lost answer from holding the
	// connection.
	wait, cancel := context.WithTimeout(ctx, g.approvalTimeout+5*time.Second)
	defer cancel()
	if d := g.updates.Decide(wait, id, req.RequestID, req.Control, req.Content); d != ipc.DecisionAllowOnce {
		return fmt.Errorf("%w by approval: %s", ctlsock.ErrDenied, d)
	}
	return nil
}
