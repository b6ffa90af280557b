package session

import "github.com/cortexfs/ctx/internal/fsm"

// phase is where a session's log stands. The table, as in the run
// actor's phase.go:
//
//	opening  → serving (the log opened) | broken (it could not be)
//	serving  → broken (an append failed) | removing (remove)
//	broken   → opening (a full machine: the next request tries again)
//	           | removing (a corrupt log can be removed)
//	removing → opening (the removal failed, or requests came meanwhile)
//	           | vacant (removed; nothing waits)
//	vacant   → opening (the next request starts a new log)
//
// Requests wait in the stash while opening or removing. Orthogonal to the
// phase, and so kept as fields: draining (the daemon is shutting down),
// handling (the request in hand, answered on a crash), replaying (the
// stash being answered). A move the table does not hold is refused and
// logged, never applied. A (re)started incarnation begins opening.
type phase int

const (
	phaseOpening phase = iota
	phaseServing
	phaseBroken
	phaseRemoving
	phaseVacant
)

func (p phase) String() string { return table.Name(p) }

// table is the transition table.
var table = fsm.Table[phase]{What: "session", Names: []string{"opening", "serving", "broken", "removing", "vacant"}, Moves: map[phase][]phase{
	phaseOpening:  {phaseServing, phaseBroken},
	phaseServing:  {phaseBroken, phaseRemoving},
	phaseBroken:   {phaseOpening, phaseRemoving},
	phaseRemoving: {phaseOpening, phaseVacant},
	phaseVacant:   {phaseOpening},
}}

// to moves the session to next, or refuses (and logs) a move the table
// does not hold.
func (a *Actor) to(next phase) bool {
	var ok bool
	a.phase, ok = table.Move(a.log, a.phase, next)
	return ok
}

// opened: the log's open has answered (serving or broken), so requests
// are handled, not stashed.
func (a *Actor) opened() bool { return a.phase == phaseServing || a.phase == phaseBroken }
