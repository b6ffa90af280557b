package tool

import (
	"github.com/cortexfs/ctx/ipc"

	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/sandbox"
)

// Call is what the run hands a tool actor: one prepared call. It is the
// props' input, not a message.
type Call struct {
	View   sandbox.View
	CallID string
	Name   string
	Args   []string
	// Ask is set when .d/approval is ask (A2): the actor asks its parent
	// before spawning.
	Ask bool
	// Group is the run's cgroup: the call's sandbox joins it before it
	// runs anything (docs/limits.md); nil places nothing.
	Group *cgroup.Group
}

// Result is sent to the parent (the run) once, when the call is over.
type Result struct {
	CallID    string
	Name      string
	Status    string // ok | error | denied | cancelled
	Content   string
	Truncated bool
	Layer     string // for denied: which authority layer refused (V3)
	// Warnings about the call's sandbox (a directory bound read-only
	// because its protected paths could not all be found).
	Warnings []string
}

// NeedApproval is sent to the parent before spawn when Ask is set.
type NeedApproval struct {
	CallID string
	MCP    *ipc.MCPCall // set for an MCP tool call
}

// Approved answers NeedApproval: only DecisionAllowOnce runs the call (A3).
type Approved struct{ Decision, Reason string }

// started hands the started process to the actor (so Cancel can kill it).
type started struct{ p *proc.Proc }

// finished carries the goroutine's outcome back to the actor.
type finished struct{ res *Result }

// checked carries the authority check's outcome back to the actor.
type checked struct {
	res  *Result // non-nil: refused
	prep *prepared
}
