package tool

import (
	"log/slog"
	"testing"

	"github.com/cortexfs/ctx/internal/fsm/fsmtest"
)

// TestPhaseTable: every move the table holds is taken; every other one is
// refused, logged, and leaves the tool call where it was. spec: A2 A3
func TestPhaseTable(t *testing.T) {
	fsmtest.Check(t, table, 8, func(log *slog.Logger, from, to phase) (bool, phase) {
		a := &Actor{phase: from, log: log}
		ok := a.to(to)
		return ok, a.phase
	})
}
