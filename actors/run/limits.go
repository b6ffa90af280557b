package run

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/ipc"
)

// The bounds of one run, in one place.
const (
	// MaxCalls is the tool calls a run may make, model runs included
	// (spec: X6); the ninth concludes the run with limit_exceeded.
	MaxCalls = 8
	// MaxStarts is the agent process starts of an executable agent's run
	// (spec: X6): one per step, the first plus one after each call.
	MaxStarts = 9
	// MaxModelTurns is the provider requests of a model run: the X6 bound
	// carried over (one turn per step, as MaxStarts).
	MaxModelTurns = MaxStarts
	// MaxStepOutput bounds one step's stdout; past it the output is invalid.
	MaxStepOutput = 16 << 20
)

// callBound is the tool calls this run may make: the spec's fixed 8 for an
// sdk-envelope-v1 agent (spec: X6), else the definition's `calls` in
// .d/limits (default 8) for model and acp-v1 agents.
func (a *Actor) callBound() int {
	if a.def == nil || a.def.Kind == agentdef.KindExec && a.def.ABI != agentdef.ABIACP || a.def.Limits.Calls <= 0 {
		return MaxCalls
	}
	return int(a.def.Limits.Calls)
}

// turnBound is a model run's provider requests: one more than its calls.
func (a *Actor) turnBound() int { return a.callBound() + 1 }

// takeCall takes one of the run's tool calls — every engine's, the one
// place the call bound is enforced. Past it the run is concluded with
// limit_exceeded (an ACP agent's session cancelled first) and takeCall
// returns false. spec: X6
func (a *Actor) takeCall(c actor.Context) bool {
	a.calls++
	if a.calls <= a.callBound() {
		return true
	}
	a.eng.halt() // an ACP agent's session is cancelled first
	a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeLimitExceeded,
		"run reached %d tool calls", a.callBound())), ipc.StatusError)
	a.eng.end()
	return false
}

// takeStart takes one of the run's agent process starts (one per step of
// an executable agent: the first and one after each call; an ACP agent's
// one): the one place the start bound is enforced. spec: X6
func (a *Actor) takeStart(c actor.Context) bool {
	if a.starts >= MaxStarts {
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeLimitExceeded,
			"run reached %d agent process starts", MaxStarts)), ipc.StatusError)
		return false
	}
	a.starts++
	return true
}

// takeTurn takes one of a model run's provider requests, the model's
// process starts: one more than its calls. spec: X6
func (a *Actor) takeTurn(c actor.Context) bool {
	if a.turns >= a.turnBound() {
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeLimitExceeded,
			"run reached %d model turns", a.turnBound())), ipc.StatusError)
		return false
	}
	a.turns++
	return true
}
