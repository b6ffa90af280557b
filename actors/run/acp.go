package run

// acp-v1 runs: the agent process is an Agent Client
// Protocol agent, started once per run in the run's sandbox; the run is its
// ACP client (internal/acpclient over github.com/coder/acp-go-sdk):
// initialize, session/new, one session/prompt with the send's input. Every
// request and wait happens in goroutines that send messages back to the
// actor; Receive never blocks.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/envelope"

	"github.com/asynkron/protoactor-go/actor"
	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/internal/acpclient"
	"github.com/cortexfs/ctx/internal/imageblob"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/ipc"
)

// acpEngine is an acp-v1 run: the agent process and its conversation.
type acpEngine struct {
	r       *Actor
	deltas  reply
	p       *proc.Proc
	conn    *acp.ClientSideConnection
	session acp.SessionId
	stop    context.CancelFunc // ends the conversation's requests
	pending map[string]func(decision string)
	open    map[string]string // terminal call id → name, until its result
	backed  map[string]bool   // reported calls a terminal already backs
	order   map[string]int    // reported call id → the order it was recorded in
	terms   int
}

func (e *acpEngine) receive(c actor.Context, m any) bool {
	switch m := m.(type) {
	case *acpStarted:
		e.onACPStarted(c, m)
	case *acpSession:
		e.session = m.id
	case *acpFrame:
		e.onACPFrame(c, m)
	case *acpPermission:
		e.onACPPermission(c, m)
	case *ApprovalAnswer:
		e.onACPApprovalAnswer(m)
	case *acpTerminal:
		e.onACPTerminal(c, m)
	case *acpProc:
		e.onACPProc(m)
	case *acpFlood:
		e.onACPFlood(c)
	case *acpEnded:
		e.onACPEnded(c, m)
	case *acpExited:
		e.onACPExited(c, m)
	default:
		return false
	}
	return true
}

// An ACP agent runs its own tools, reported (onACPFrame); none goes
// through the run's tool actors.
func (e *acpEngine) toolResult(actor.Context, *tool.Result) {}

func (e *acpEngine) onACPStarted(c actor.Context, m *acpStarted) {
	a := e.r
	a.startPending = false
	if m.err != nil {
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(m.code, m.err)), ipc.StatusError)
		a.maybeStop(c)
		return
	}
	e.p, e.conn = m.p, m.conn
	a.procs = append(a.procs, m.p)
	if a.phase.concluded() {
		e.end()
	}
}

// onACPFrame records what the agent reported. A tool call counts toward
// the 8-call bound (X6): the 9th is not recorded; the session is
// cancelled and the run concludes limit_exceeded.
func (e *acpEngine) onACPFrame(c actor.Context, m *acpFrame) {
	a := e.r
	if a.phase.concluded() {
		// spec: X12 — nothing more is recorded. A terminal's result comes
		// once its process is gone: the run may now be able to stop.
		a.maybeStop(c)
		return
	}
	f := m.f
	switch f.Type {
	case ipc.TypeDelta:
		e.deltas.WriteString(f.Text)
	case ipc.TypeToolCall:
		if f.Name == "acp" && !a.takeCall(c) {
			return
		}
		e.open[f.CallID] = f.Name // until its result; concluding ends what is left
		e.order[f.CallID] = len(e.order)
	case ipc.TypeToolResult:
		delete(e.open, f.CallID)
	}
	a.emit(c, f)
}

// onACPPermission: auto mode allows once; ask mode goes through the
// session's approval path (A2) with the agent's tool call id.
func (e *acpEngine) onACPPermission(c actor.Context, m *acpPermission) {
	a := e.r
	if a.phase.concluded() {
		m.reply <- false
		return
	}
	if a.def.Approval != "ask" {
		m.reply <- true
		return
	}
	if ipc.CheckID("tool call id", m.callID) != nil || e.pending[m.callID] != nil {
		m.reply <- false // an id the approve line cannot name, or one already asked
		return
	}
	e.pending[m.callID] = func(d string) { m.reply <- d == "allow_once" }
	c.Request(c.Parent(), &ApprovalNeeded{Run: a.spec.RunID, CallID: m.callID, Name: m.name, Args: nonNil(m.args)})
}

func (e *acpEngine) onACPApprovalAnswer(m *ApprovalAnswer) {
	if f := e.pending[m.CallID]; f != nil {
		delete(e.pending, m.CallID)
		f(m.Decision)
	}
}

// onACPTerminal grants or refuses a terminal: a tool-like call, counted,
// recorded as a tool_call named "terminal", approved in ask mode.
func (e *acpEngine) onACPTerminal(c actor.Context, m *acpTerminal) {
	a := e.r
	if a.phase.concluded() {
		m.reply <- ""
		return
	}
	// A terminal while a reported call is open (announced, not ended, not
	// yet backed by a terminal) is that call's terminal: the call was
	// counted when reported, so the command is not counted again. Each
	// reported call backs at most one terminal, so terminals never
	// outnumber counted calls. spec: X6 (the bound counts calls once)
	if backs := e.openReported(); backs != "" {
		e.backed[backs] = true
	} else if !a.takeCall(c) {
		m.reply <- ""
		return
	}
	e.terms++
	id := fmt.Sprintf("term-%d", e.terms)
	e.open[id] = "terminal"
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolCall, CallID: id, Name: "terminal", Args: nonNil(m.argv)})
	if a.def.Approval != "ask" {
		m.reply <- id
		return
	}
	e.pending[id] = func(d string) {
		if d == "allow_once" {
			m.reply <- id
			return
		}
		delete(e.open, id)
		a.emitLater(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: id, Name: "terminal", Status: "denied", Content: "denied: " + d})
		m.reply <- ""
	}
	c.Request(c.Parent(), &ApprovalNeeded{Run: a.spec.RunID, CallID: id, Name: "terminal", Args: nonNil(m.argv)})
}

// openReported is the earliest reported call still open that no terminal
// backs yet; "" when there is none.
func (e *acpEngine) openReported() string {
	var ids []string
	for id, name := range e.open {
		if name == "acp" && !e.backed[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	sort.Slice(ids, func(i, j int) bool { return e.order[ids[i]] < e.order[ids[j]] })
	return ids[0]
}

// emitLater emits unless the run is over (an answer arriving late).
func (a *Actor) emitLater(c actor.Context, f *ipc.Frame) {
	if !a.phase.concluded() {
		a.emit(c, f)
	}
}

func (e *acpEngine) onACPProc(m *acpProc) {
	a := e.r
	a.procs = append(a.procs, m.p)
	if a.phase.concluded() {
		m.p.Terminate(a.ctx, a.cfg.CancelGrace)
	}
}

func (e *acpEngine) onACPFlood(c actor.Context) {
	a := e.r
	if a.phase.concluded() {
		return
	}
	e.halt()
	a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeLimitExceeded,
		"the ACP agent sent more than %d session updates in one run", acpclient.MaxUpdates)), ipc.StatusError)
	e.end()
}

// onACPEnded concludes from the prompt's answer: end_turn (and the other
// normal stops) → assistant with the streamed text; refusal → denied; an
// error → a clear error with the agent's stderr tail.
func (e *acpEngine) onACPEnded(c actor.Context, m *acpEnded) {
	a := e.r
	if a.phase.concluded() {
		return
	}
	if m.err != nil {
		code := ipc.CodeInvalidAgentOutput
		switch {
		case errors.Is(m.err, errNoAnswer) || errors.Is(m.err, errIdle):
			code = ipc.CodeAgentTimeout
		case errors.Is(m.err, errNoImages):
			a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(ipc.CodeNoImages, m.err)), ipc.StatusError)
			e.end()
			return
		case errors.Is(m.err, imageblob.ErrBlob):
			a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(ipc.CodeImageUnavailable, m.err)), ipc.StatusError)
			e.end()
			return
		}
		if errors.Is(m.err, errIdle) {
			e.halt() // session/cancel, then the usual ending
		}
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(code, "%v%s", m.err, stderrTail(m.stderr))), ipc.StatusError)
		e.end()
		return
	}
	switch m.stop {
	case acp.StopReasonEndTurn:
	case acp.StopReasonRefusal:
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeDenied, "the ACP agent refused the prompt (stop reason refusal)")), ipc.StatusError)
		return
	case acp.StopReasonCancelled:
		a.conclude(c, &ipc.Frame{Type: ipc.TypeCancelled}, ipc.StatusCancelled)
		return
	default:
		a.warn(c, []string{fmt.Sprintf("the ACP agent stopped with reason %q", m.stop)})
	}
	a.concludeReply(c, e.deltas.b.String(), e.deltas.total)
}

func (e *acpEngine) onACPExited(c actor.Context, m *acpExited) {
	a := e.r
	a.reap()
	if !a.phase.concluded() {
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeInvalidAgentOutput,
			"the ACP agent exited with status %d before answering the prompt%s", m.code, stderrTail(m.stderr))), ipc.StatusError)
	}
	a.maybeStop(c)
}

// halt sends session/cancel (off the actor, bounded).
func (e *acpEngine) halt() {
	if e.conn == nil || e.session == "" {
		return
	}
	conn, id := e.conn, e.session
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Cancel(ctx, acp.CancelNotification{SessionId: id})
	}()
}

// end fails every pending question and starts ending the agent and its
// terminals: SIGTERM, grace, SIGKILL (X12).
func (e *acpEngine) end() {
	if e.stop == nil {
		return // never started
	}
	for id, f := range e.pending {
		delete(e.pending, id)
		f("eof")
	}
	e.stop() // the conversation's requests end
	for _, p := range e.r.procs {
		p.Terminate(e.r.ctx, e.r.cfg.CancelGrace)
	}
}

// concluding gives every call still open — a terminal in flight, or a
// tool call the agent reported and never finished — its result, so no
// tool_call in the log is left without one: cancelled when the run was
// cancelled, an error otherwise.
func (e *acpEngine) concluding(c actor.Context, runStatus string) {
	if len(e.open) == 0 {
		return
	}
	ids := make([]string, 0, len(e.open))
	for id := range e.open {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		name := e.open[id]
		delete(e.open, id)
		f := &ipc.Frame{Type: ipc.TypeToolResult, CallID: id, Name: name, Status: envelope.StatusCancelled, Content: "cancelled"}
		if runStatus != ipc.StatusCancelled {
			f.Status, f.Content = envelope.StatusError, "the run ended before the agent finished this call"
		}
		e.r.emit(c, f)
	}
}

type acpStarted struct {
	p    *proc.Proc
	conn *acp.ClientSideConnection
	err  error
	code string
}

type acpSession struct{ id acp.SessionId }

// acpFrame is a frame the ACP client or a terminal produced.
type acpFrame struct{ f *ipc.Frame }

// acpPermission is a session/request_permission; reply gets the answer.
type acpPermission struct {
	callID, name string
	args         []string
	reply        chan bool
}

// acpTerminal asks for a terminal call; reply gets its call id, or "".
type acpTerminal struct {
	argv  []string
	reply chan string
}

// acpProc is a started terminal process, ended with the run.
type acpProc struct{ p *proc.Proc }

type acpFlood struct{}

// acpEnded is the prompt's answer (or the conversation's failure).
type acpEnded struct {
	stop   acp.StopReason
	err    error
	stderr []byte
}

type acpExited struct {
	code   int
	stderr []byte
}
