package run

import "fmt"

// phase is where a run is in its life; every handler acts only in the
// phases it names. The transitions, all through enter:
//
//	from        on                                   to
//	loading     defLoaded (definition and prompt ok) running
//	loading     conclude, with placeholders or audit concluding
//	running     conclude, with placeholders or audit concluding
//	loading     conclude, with neither               concluded
//	running     conclude, with neither               concluded
//	concluding  audited (conclusion and done sent)   concluded
//	any         Concluded (done is durable)          finishing
//	finishing   no process left, no start pending    the actor stops
//
// How a run concluded — the answer, an error, invalid agent output (X9), a
// cancel — is carried by its conclusion frame and done status, not by the
// phase: once the conclusion is decided nothing more is recorded (X12), so
// no handler needs to know why. Whether a process start is under way off
// the actor is orthogonal (a start may still report after the conclusion)
// and kept in Actor.startPending.
type phase int

const (
	// phaseLoading: Started; the definition, the prompt and the workspace
	// audit are read off the actor.
	phaseLoading phase = iota
	// phaseRunning: the start frame is out; steps, model turns, the ACP
	// conversation and tool calls run.
	phaseRunning
	// phaseConcluding: the conclusion is decided; off the actor, the run's
	// placeholders are unpinned and the workspace is compared with its
	// snapshot before conclusion and done are emitted. Nothing more is
	// recorded.
	phaseConcluding
	// phaseConcluded: conclusion and done emitted; waiting for the session
	// to say done is durable.
	phaseConcluded
	// phaseFinishing: Concluded received; every process is being ended
	// (SIGTERM, grace, SIGKILL); the actor stops once they are gone.
	phaseFinishing
)

func (p phase) String() string {
	switch p {
	case phaseLoading:
		return "loading"
	case phaseRunning:
		return "running"
	case phaseConcluding:
		return "concluding"
	case phaseConcluded:
		return "concluded"
	case phaseFinishing:
		return "finishing"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// concluded reports whether the run's conclusion is decided: from then on
// nothing the agent, the model or a tool does is recorded. spec: X12
func (p phase) concluded() bool { return p >= phaseConcluding }

// canGo reports whether the table above allows the move from p to next.
// Staying in a phase is allowed (a second Concluded changes nothing).
func (p phase) canGo(next phase) bool {
	if next == p || next == phaseFinishing {
		return true
	}
	switch p {
	case phaseLoading:
		return next == phaseRunning || next == phaseConcluding || next == phaseConcluded
	case phaseRunning:
		return next == phaseConcluding || next == phaseConcluded
	case phaseConcluding:
		return next == phaseConcluded
	}
	return false
}

// enter moves the run to next. A move the table does not allow is a bug:
// it is logged and refused, so a run never goes back from its conclusion.
func (a *Actor) enter(next phase) {
	if !a.phase.canGo(next) {
		a.log.Error("run phase: refused transition", "from", a.phase, "to", next)
		return
	}
	a.phase = next
}
