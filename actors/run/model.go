package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/ipc"
)

// CodeProviderError is the wire code of a provider failure that is not a
// missing model (4xx, malformed stream, failure after output began).
const CodeProviderError = "provider_error"

// model is the state of a model-backed run: the conversation sent to the
// provider, grown turn by turn with the host's tool results.
type model struct {
	disp    *provider.Dispatcher
	req     provider.Request
	cands   []string
	usable  map[string]string // model -> "" when usable, else the reason
	turn    int
	cancel  context.CancelFunc
	text    strings.Builder
	calls   []provider.Event // the turn's tool calls, run in order
	current string           // our call id of the call in flight
	provID  string           // the provider's id of that call
}

type modelEvent struct {
	turn int
	ev   provider.Event
}

type modelCandidate struct {
	turn                  int
	model, status, reason string
}

type modelDone struct {
	turn int
	err  error
}

// startModel prepares a model run: the provider configuration (re-read per
// run, so a rotated key is picked up), the rendered prompt as the first
// request, and tsh as the one native tool (K1).
func (a *Actor) startModel(c actor.Context) {
	cfg, err := provider.Load(a.cfg.Layout.Root, a.cfg.Layout.UID, os.Getenv)
	if err == nil {
		a.model = &model{}
		a.model.disp, err = provider.NewDispatcher(cfg, provider.Options{Logger: a.log})
	}
	if err != nil {
		a.conclude(c, &ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeModelUnavailable, Message: err.Error()}, "error")
		return
	}
	m := a.model
	msgs := a.prep.Prompt.Messages()
	m.req = provider.Request{Tools: []provider.Tool{provider.TSH()}} // spec: K1 — tsh only
	for i, pm := range msgs {
		switch {
		case i == 0 && pm.Role == "system":
			m.req.System = pm.Content
		case pm.Role == "assistant":
			m.req.Messages = append(m.req.Messages, provider.Message{Role: provider.RoleAssistant, Text: pm.Content})
		case pm.Role == "tool":
			// Earlier runs' tool results are history, not calls of this conversation.
			m.req.Messages = append(m.req.Messages, provider.Message{Role: provider.RoleUser, Text: "[earlier tool result]\n" + pm.Content})
		default:
			m.req.Messages = append(m.req.Messages, provider.Message{Role: provider.RoleUser, Text: pm.Content})
		}
	}
	m.usable = map[string]string{}
	for _, cd := range a.prep.Candidates {
		m.cands = append(m.cands, cd.Model)
		if !cd.Usable {
			m.usable[cd.Model] = cd.Reason
		}
	}
	a.modelTurn(c)
}

// modelTurn dispatches one model turn off the actor; its events come back as messages.
func (a *Actor) modelTurn(c actor.Context) {
	m := a.model
	if a.cancelled || a.concluded {
		return
	}
	if m.turn >= MaxStarts { // X6-style bound on model turns
		a.conclude(c, &ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeLimitExceeded,
			Message: fmt.Sprintf("run reached %d model turns", MaxStarts)}, "error")
		return
	}
	m.turn++
	m.text.Reset()
	m.calls = nil
	ctx, cancel := context.WithCancel(a.ctx)
	m.cancel = cancel
	turn, self, root := m.turn, c.Self(), c.ActorSystem().Root
	req, cands, usable, disp := m.req, m.cands, m.usable, m.disp
	a.cfg.Procs.Add(1) // the stream is waited for at shutdown like a process
	go func() {
		defer a.cfg.Procs.Done()
		_, err := disp.Dispatch(ctx, cands, provider.Fixed(req, func(model string) (bool, string) {
			why, bad := usable[model]
			return !bad, why
		}), func(ev provider.Event) error {
			root.Send(self, &modelEvent{turn: turn, ev: ev})
			return nil
		}, func(model, status, reason string) {
			root.Send(self, &modelCandidate{turn: turn, model: model, status: status, reason: reason}) // spec: W6
		})
		root.Send(self, &modelDone{turn: turn, err: err})
	}()
}

func (a *Actor) onModelEvent(c actor.Context, e *modelEvent) {
	m := a.model
	if m == nil || e.turn != m.turn || a.concluded || a.cancelled {
		return // spec: X12 — nothing after the conclusion or a cancel
	}
	switch e.ev.Kind {
	case provider.EventDelta:
		m.text.WriteString(e.ev.Text)
		a.emit(c, &ipc.Frame{Type: ipc.TypeDelta, Text: e.ev.Text})
	case provider.EventToolCall:
		m.calls = append(m.calls, e.ev)
	}
}

func (a *Actor) onModelCandidate(c actor.Context, e *modelCandidate) {
	if a.model == nil || e.turn != a.model.turn || a.concluded {
		return
	}
	a.emit(c, &ipc.Frame{Type: ipc.TypeCandidate, Model: e.model, Status: e.status, Reason: e.reason})
}

func (a *Actor) onModelDone(c actor.Context, e *modelDone) {
	m := a.model
	if m == nil || e.turn != m.turn || a.concluded || a.cancelled {
		return
	}
	if e.err != nil {
		code := CodeProviderError
		if errors.Is(e.err, provider.ErrModelUnavailable) {
			code = ipc.CodeModelUnavailable
		}
		a.conclude(c, &ipc.Frame{Type: ipc.TypeError, Code: code, Message: e.err.Error()}, "error")
		return
	}
	if len(m.calls) == 0 {
		// The assistant conclusion is the text of the last turn (interfaces.md).
		a.conclude(c, &ipc.Frame{Type: ipc.TypeAssistant, Text: m.text.String()}, "ok")
		return
	}
	for i, call := range m.calls {
		msg := provider.Message{Role: provider.RoleAssistant, ToolCallID: call.CallID, ToolName: call.Name, ToolArgs: call.Args}
		if i == 0 {
			msg.Text = m.text.String()
		}
		m.req.Messages = append(m.req.Messages, msg)
	}
	a.nextModelCall(c)
}

// nextModelCall runs the turn's next tool call through the tool actor, or
// starts the next turn when all are answered.
func (a *Actor) nextModelCall(c actor.Context) {
	m := a.model
	if a.cancelled || a.concluded {
		return
	}
	if len(m.calls) == 0 {
		a.modelTurn(c)
		return
	}
	call := m.calls[0]
	m.calls = m.calls[1:]
	id := call.CallID
	if ipc.CheckID("call id", id) != nil || a.seenCalls[id] {
		id = fmt.Sprintf("call-%d-%d", m.turn, a.calls+1) // a provider id we cannot use verbatim
	}
	m.current, m.provID = id, call.CallID
	a.seenCalls[id] = true
	a.calls++
	if a.calls > MaxCalls { // spec: X6 — 8 tool calls per run, models included
		a.conclude(c, &ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeLimitExceeded,
			Message: fmt.Sprintf("run reached %d tool calls", MaxCalls)}, "error")
		return
	}
	if call.ArgsError != "" {
		a.emit(c, &ipc.Frame{Type: ipc.TypeToolCall, CallID: id, Name: call.Name, Args: []string{}})
		r := &tool.Result{CallID: id, Name: call.Name, Status: envelope.StatusError, Content: "invalid tool input: " + call.ArgsError}
		// spec: X7 — every tool_call gets its one host-written tool_result.
		a.emit(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: r.CallID, Name: r.Name, Status: r.Status, Content: r.Content})
		a.onModelToolResult(c, r)
		return
	}
	a.startTool(c, &envelope.Line{Type: "tool_call", ID: id, Name: call.Name, Args: call.Args})
}

// onModelToolResult feeds a host result back into the conversation.
func (a *Actor) onModelToolResult(c actor.Context, r *tool.Result) {
	m := a.model
	if m.current != r.CallID {
		return
	}
	// The provider knows the call by its own id.
	m.req.Messages = append(m.req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: m.provID,
		ToolName: r.Name, Text: r.Content, IsError: r.Status != envelope.StatusOK})
	m.current, m.provID = "", ""
	a.nextModelCall(c)
}
