package run

import "testing"

// TestPhaseTransitions is the table in phase.go, move by move: a run goes
// forward only, and Concluded (→ finishing) is taken in any phase.
func TestPhaseTransitions(t *testing.T) {
	all := []phase{phaseLoading, phaseRunning, phaseConcluding, phaseConcluded, phaseFinishing}
	allowed := map[[2]phase]bool{
		{phaseLoading, phaseRunning}:       true, // defLoaded
		{phaseLoading, phaseConcluding}:    true, // conclude, with an audit
		{phaseLoading, phaseConcluded}:     true, // conclude, without one
		{phaseRunning, phaseConcluding}:    true,
		{phaseRunning, phaseConcluded}:     true,
		{phaseConcluding, phaseConcluded}:  true, // audited
		{phaseLoading, phaseFinishing}:     true, // Concluded, from any phase
		{phaseRunning, phaseFinishing}:     true,
		{phaseConcluding, phaseFinishing}:  true,
		{phaseConcluded, phaseFinishing}:   true,
		{phaseFinishing, phaseFinishing}:   true,
		{phaseLoading, phaseLoading}:       true, // staying is no move
		{phaseRunning, phaseRunning}:       true,
		{phaseConcluding, phaseConcluding}: true,
		{phaseConcluded, phaseConcluded}:   true,
	}
	for _, from := range all {
		for _, to := range all {
			if got, want := from.canGo(to), allowed[[2]phase{from, to}]; got != want {
				t.Errorf("%s → %s: canGo = %v, want %v", from, to, got, want)
			}
		}
	}
}

// TestPhaseConcluded: from concluding on, nothing more is recorded. spec: X12
func TestPhaseConcluded(t *testing.T) {
	for p, want := range map[phase]bool{phaseLoading: false, phaseRunning: false,
		phaseConcluding: true, phaseConcluded: true, phaseFinishing: true} {
		if p.concluded() != want {
			t.Errorf("%s.concluded() = %v, want %v", p, p.concluded(), want)
		}
	}
	if s := phase(99).String(); s != "phase(99)" {
		t.Errorf("String of an unknown phase = %q", s)
	}
}
