package session

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestPhaseTable: every move the table holds is taken; every other one is
// refused, logged, and leaves the session where it was — serving a log
// still opening, a removed session broken, a corrupt log served again
// without opening it. spec: L4 P4
func TestPhaseTable(t *testing.T) {
	all := []phase{phaseOpening, phaseServing, phaseBroken, phaseRemoving, phaseVacant}
	allowed := map[[2]phase]bool{}
	for from, tos := range moves {
		for _, to := range tos {
			allowed[[2]phase{from, to}] = true
		}
	}
	if len(allowed) != 9 {
		t.Fatalf("the table holds %d moves, want the 9 of phase.go's comment", len(allowed))
	}
	for _, from := range all {
		for _, to := range all {
			var logs bytes.Buffer
			a := &Actor{phase: from, log: slog.New(slog.NewTextHandler(&logs, nil))}
			ok := a.to(to)
			want := allowed[[2]phase{from, to}]
			switch {
			case ok != want:
				t.Errorf("%s → %s: moved %v, want %v", from, to, ok, want)
			case ok && a.phase != to:
				t.Errorf("%s → %s: now %s", from, to, a.phase)
			case !ok && (a.phase != from || !strings.Contains(logs.String(), "impossible phase move refused")):
				t.Errorf("%s → %s refused: now %s, log %q", from, to, a.phase, logs.String())
			}
		}
	}
	for p, want := range map[phase]bool{phaseOpening: false, phaseServing: true, phaseBroken: true, phaseRemoving: false, phaseVacant: false} {
		if (&Actor{phase: p}).opened() != want {
			t.Errorf("%s: opened %v", p, !want)
		}
	}
}
