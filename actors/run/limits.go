package run

// The bounds of one run, in one place (issue 17 item 2).
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
