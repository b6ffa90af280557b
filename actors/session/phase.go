package session

import (
	"fmt"
	"log/slog"
	"slices"
)

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

var phaseNames = [...]string{"opening", "serving", "broken", "removing", "vacant"}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// moves is the transition table.
var moves = map[phase][]phase{
	phaseOpening:  {phaseServing, phaseBroken},
	phaseServing:  {phaseBroken, phaseRemoving},
	phaseBroken:   {phaseOpening, phaseRemoving},
	phaseRemoving: {phaseOpening, phaseVacant},
	phaseVacant:   {phaseOpening},
}

// to moves the session to next, or refuses (and logs) a move the table
// does not hold.
func (a *Actor) to(next phase) bool {
	if !slices.Contains(moves[a.phase], next) {
		a.logger().Warn("session: impossible phase move refused", "from", a.phase, "to", next)
		return false
	}
	a.phase = next
	return true
}

// opened: the log's open has answered (serving or broken), so requests
// are handled, not stashed.
func (a *Actor) opened() bool { return a.phase == phaseServing || a.phase == phaseBroken }

func (a *Actor) logger() *slog.Logger {
	if a.log == nil {
		return slog.Default()
	}
	return a.log
}
