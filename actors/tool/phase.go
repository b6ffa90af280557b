package tool

import "github.com/cortexfs/ctx/internal/fsm"

// phase is where one tool call is. The table, as in the run actor's
// phase.go:
//
//	checking  → awaiting (ask mode) | spawning (auto) | reported (refused)
//	awaiting  → spawning (allow_once) | reported (anything else: A3)
//	spawning  → running (the process started) | reported (an MCP call's
//	            result, a checked file changed, the sandbox failed)
//	running   → reported
//	reported  → nothing: a late message changes nothing
//
// A move the table does not hold is refused and logged, never applied.
type phase int

const (
	phaseChecking phase = iota
	phaseAwaiting
	phaseSpawning
	phaseRunning
	phaseReported
)

func (p phase) String() string { return table.Name(p) }

// table is the transition table.
var table = fsm.Table[phase]{What: "tool call", Names: []string{"checking", "awaiting", "spawning", "running", "reported"}, Moves: map[phase][]phase{
	phaseChecking: {phaseAwaiting, phaseSpawning, phaseReported},
	phaseAwaiting: {phaseSpawning, phaseReported},
	phaseSpawning: {phaseRunning, phaseReported},
	phaseRunning:  {phaseReported},
	phaseReported: nil,
}}

// to moves the call to next, or refuses (and logs) a move the table does
// not hold.
func (a *Actor) to(next phase) bool {
	var ok bool
	a.phase, ok = table.Move(a.log, a.phase, next)
	return ok
}
