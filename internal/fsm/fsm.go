// Package fsm is an actor's phase table: the moves it allows, written once
// in code beside the comment that draws it, and the one check that refuses
// (and logs) a move the table does not hold, so an impossible move is never
// applied silently.
package fsm

import (
	"fmt"
	"log/slog"
	"slices"
)

// Table is the phases P (0, 1, … named by Names) and the moves between them.
type Table[P ~int] struct {
	What  string   // what moves, for the log ("session", "tool call")
	Names []string // Names[p] is phase p's name
	Moves map[P][]P
}

// Name is p's name.
func (t Table[P]) Name(p P) string {
	if int(p) >= 0 && int(p) < len(t.Names) {
		return t.Names[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// Allows reports whether the table holds the move from → to.
func (t Table[P]) Allows(from, to P) bool { return slices.Contains(t.Moves[from], to) }

// Move is where a move from cur to next lands: next when the table allows
// it, else cur, with the refusal logged.
func (t Table[P]) Move(log *slog.Logger, cur, next P) (P, bool) {
	if !t.Allows(cur, next) {
		if log == nil {
			log = slog.Default()
		}
		log.Warn(t.What+": impossible phase move refused", "from", t.Name(cur), "to", t.Name(next))
		return cur, false
	}
	return next, true
}

// Phases is every phase of the table, in order.
func (t Table[P]) Phases() []P {
	ps := make([]P, len(t.Names))
	for i := range ps {
		ps[i] = P(i)
	}
	return ps
}
