package run

import "github.com/cortexfs/ctx/internal/agentdef"

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
