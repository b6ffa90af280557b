package tool

import (
	"fmt"
	"slices"
)

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

var phaseNames = [...]string{"checking", "awaiting", "spawning", "running", "reported"}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// moves is the transition table.
var moves = map[phase][]phase{
	phaseChecking: {phaseAwaiting, phaseSpawning, phaseReported},
	phaseAwaiting: {phaseSpawning, phaseReported},
	phaseSpawning: {phaseRunning, phaseReported},
	phaseRunning:  {phaseReported},
	phaseReported: nil,
}

// to moves the call to next, or refuses (and logs) a move the table does
// not hold.
func (a *Actor) to(next phase) bool {
	if !slices.Contains(moves[a.phase], next) {
		a.logger().Warn("tool call: impossible phase move refused", "from", a.phase, "to", next)
		return false
	}
	a.phase = next
	return true
}
