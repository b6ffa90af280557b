package run

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/ipc"
)

// engine is what a run runs: one of four, each in its own file — the tsh
// op (one tsh call, P3; below), the sdk-envelope-v1 step loop (X2–X9,
// envelope.go), a model's turns (K1, W6–W8, model.go) and an ACP
// conversation (acp.go). An engine keeps its own state and handles its own
// continuations. The run keeps what they share, so each rule has one home:
// the phase (phase.go), the bounds — takeCall, takeStart, takeTurn (X6,
// limits.go) — the tool calls through tool actors (X7, X8, calls.go), the
// conclusion only the host writes and every process ended after it (X9,
// X12, end.go), and restart without authority (L4, run.go).
//
// Every method runs on the actor.
type engine interface {
	// start begins, in phase running, once the start frame is out.
	start(c actor.Context)
	// receive handles the engine's own messages; false when m is not one.
	receive(c actor.Context, m any) bool
	// toolResult goes on after the host's result of a call the engine
	// asked the run to make (startTool); its frame is already emitted.
	toolResult(c actor.Context, r *tool.Result)
	// halt stops what the engine has in flight when the run is about to
	// conclude early (a cancel, a bound, the disk): the model's stream is
	// aborted, the ACP agent's session cancelled.
	halt()
	// concluding: the conclusion is decided; the engine writes the result
	// of every call it left open (X7) before the conclusion is emitted.
	concluding(c actor.Context, status string)
	// end ends the engine's own processes and requests (X12): once done is
	// durable, or at once when the run ends the agent early.
	end()
}

// startFunc starts one sandboxed process: proc.Start, or in package tests
// a wrapper that counts or refuses starts (the process seam: every
// process of a run, agent step, ACP agent and ACP terminal, starts here).
type startFunc func(proc.Options) (*proc.Proc, error)

// hooks gives an engine the methods it has nothing to do in.
type hooks struct{}

func (hooks) receive(actor.Context, any) bool        { return false }
func (hooks) toolResult(actor.Context, *tool.Result) {}
func (hooks) halt()                                  {}
func (hooks) concluding(actor.Context, string)       {}
func (hooks) end()                                   {}

// loading is the engine of a run whose definition is still being read:
// nothing runs yet, so nothing needs stopping.
type loading struct{ hooks }

func (loading) start(actor.Context) {}

// engineFor picks the run's engine once its definition is loaded.
func (a *Actor) engineFor(m *defLoaded) engine {
	switch {
	case a.spec.Op == ipc.OpTsh:
		return &tshEngine{r: a}
	case a.def.Kind == agentdef.KindModel:
		return &modelEngine{r: a, disp: m.disp, derr: m.derr}
	case a.def.ABI == agentdef.ABIACP:
		return &acpEngine{r: a}
	}
	return &envelopeEngine{r: a}
}

// tshEngine is a tsh op: one tsh call through the tool path, no agent, no
// model (spec: P3); the run concludes with the call's status.
type tshEngine struct {
	hooks
	r *Actor
}

func (e *tshEngine) start(c actor.Context) {
	e.r.startTool(c, &envelope.Line{Type: "tool_call", ID: "call-1", Name: "tsh", Args: e.r.spec.Args})
}

func (e *tshEngine) toolResult(c actor.Context, r *tool.Result) {
	status := ipc.StatusOK
	if r.Status != envelope.StatusOK {
		status = ipc.StatusError
	}
	e.r.conclude(c, nil, status)
}
