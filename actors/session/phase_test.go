package session

import (
	"log/slog"
	"testing"

	"github.com/cortexfs/ctx/internal/fsm/fsmtest"
)

// TestPhaseTable: every move the table holds is taken; every other one is
// refused, logged, and leaves the session where it was; requests are
// handled (not stashed) exactly while serving or broken. spec: L4 P4
func TestPhaseTable(t *testing.T) {
	fsmtest.Check(t, table, 9, func(log *slog.Logger, from, to phase) (bool, phase) {
		a := &Actor{phase: from, log: log}
		ok := a.to(to)
		return ok, a.phase
	})
	for p, want := range map[phase]bool{phaseOpening: false, phaseServing: true, phaseBroken: true, phaseRemoving: false, phaseVacant: false} {
		if (&Actor{phase: p}).opened() != want {
			t.Errorf("%s: opened %v", p, !want)
		}
	}
}
