package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/imageblob"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/prompt"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/internal/runprep"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/ipc"
)

// Wire codes of model runs (listed in the README).
const (
	// CodeProviderError is a provider failure that is not a missing model
	// (4xx, malformed stream, failure after output began).
	CodeProviderError = "provider_error"
	// CodeTruncated: the model's reply was cut at its output limit inside a
	// tool call; no call of that reply was run.
	CodeTruncated = "truncated"
	// CodeRefused: the model refused, or the provider's content filter
	// stopped the reply; the message carries the refusal.
	CodeRefused = "refused"
)

// modelEngine runs a model-backed run: the model's turns, tsh its one
// native tool (K1). The conversation is rendered again for every dispatch
// and every candidate (W6, W8): the prompt from the sources read at the
// run's start, the tool context as it is now, and this run's own turns.
type modelEngine struct {
	hooks   // concluding, end: the run ends the tool call in flight (calls.go); a model has no process
	r       *Actor
	derr    error // why the run has no dispatcher (model_unavailable)
	disp    *provider.Dispatcher
	cands   []string
	turns   [][]prompt.Message // this run's completed turns: calls and their results
	cur     []prompt.Message   // the turn whose calls are running
	turn    int
	cancel  context.CancelFunc
	text    strings.Builder
	calls   []provider.Event // the turn's tool calls, run in order
	last    provider.Event   // the turn's EventDone
	current string           // our call id of the call in flight
	provID  string           // the provider's id of that call
	paused  string           // text of replies that ended with pause_turn, continued by the next turn
}

type modelEvent struct {
	turn  int
	ev    provider.Event
	model string // the candidate that streamed it (provider/model)
}

type modelCandidate struct {
	turn                  int
	model, status, reason string
}

// modelPrepared reports what one dispatch's render left out or cut, so it
// is announced.
type modelPrepared struct {
	turn     int
	warnings []string
}

type modelDone struct {
	turn   int
	err    error
	budget bool // every candidate that could be used was ruled out by the budget
}

// loadDispatcher reads the provider configuration — re-read per run, so a
// rotated key is picked up — and builds the run's dispatcher. It reads
// files, so it runs off the actor, beside the definition's load.
func loadDispatcher(l layout.Layout, log *slog.Logger) (*provider.Dispatcher, error) {
	cfg, err := provider.Load(l.Root, l.UID, os.Getenv)
	if err != nil {
		return nil, err
	}
	return provider.NewDispatcher(cfg, provider.Options{Logger: log})
}

// start starts a model run with the dispatcher loaded off the actor (or
// concludes model_unavailable when there is none).
func (m *modelEngine) start(c actor.Context) {
	if m.derr != nil {
		m.r.conclude(c, ipc.ErrorFrame("", ipc.WithCode(ipc.CodeModelUnavailable, m.derr)), ipc.StatusError)
		return
	}
	for _, cd := range m.r.prep.Candidates {
		m.cands = append(m.cands, cd.Model)
	}
	m.modelTurn(c)
}

func (m *modelEngine) receive(c actor.Context, msg any) bool {
	switch msg := msg.(type) {
	case *modelEvent:
		m.onModelEvent(c, msg)
	case *modelCandidate:
		m.onModelCandidate(c, msg)
	case *modelPrepared:
		m.onModelPrepared(c, msg)
	case *modelDone:
		m.onModelDone(c, msg)
	default:
		return false
	}
	return true
}

// halt aborts the turn's HTTP stream at once. spec: X12
func (m *modelEngine) halt() {
	if m.cancel != nil {
		m.cancel()
	}
}

// request converts one rendered message array into a provider request; a
// user message's images are read by load (from the session's blob store).
func request(msgs []prompt.Message, load func(ipc.Image) (provider.Image, error)) (provider.Request, error) {
	req := provider.Request{Tools: []provider.Tool{provider.TSH()}} // spec: K1 — tsh only
	for i, pm := range msgs {
		switch {
		case i == 0 && pm.Role == "system":
			req.System = pm.Content
		case pm.Role == "assistant" && pm.CallID != "":
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleAssistant, Text: pm.Content,
				ToolCallID: pm.CallID, ToolName: pm.Name, ToolArgs: pm.Args, ToolInput: pm.Input, Content: pm.Blocks, ToolExtra: pm.Extra})
		case pm.Role == "tool" && pm.CallID != "":
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: pm.CallID,
				ToolName: pm.Name, Text: pm.Content, IsError: pm.IsError})
		case pm.Role == "assistant":
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleAssistant, Text: pm.Content, Content: pm.Blocks})
		case pm.Role == "tool":
			// Earlier runs' tool results are history, not calls of this conversation.
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleUser, Text: "[earlier tool result]\n" + pm.Content})
		default:
			m := provider.Message{Role: provider.RoleUser, Text: pm.Content}
			for _, im := range pm.Images {
				img, err := load(im)
				if err != nil {
					return provider.Request{}, err
				}
				m.Images = append(m.Images, img)
			}
			req.Messages = append(req.Messages, m)
		}
	}
	return req, nil
}

// imageLoader reads images from a session's blob store for one turn's
// dispatches, each blob once (imageblob.Read: no link followed, bounded,
// its hash and type checked again). It runs off the actor.
func imageLoader(sessionDir string) func(ipc.Image) (provider.Image, error) {
	seen := map[string]provider.Image{}
	return func(im ipc.Image) (provider.Image, error) {
		if img, ok := seen[im.SHA256]; ok {
			return img, nil
		}
		b, mt, err := imageblob.Read(sessionDir, im)
		if err != nil {
			return provider.Image{}, err
		}
		img := provider.Image{MediaType: mt, Data: b}
		seen[im.SHA256] = img
		return img, nil
	}
}

// modelTurn dispatches one model turn off the actor; its events come back as messages.
func (m *modelEngine) modelTurn(c actor.Context) {
	a := m.r
	if a.phase != phaseRunning {
		return
	}
	if !a.takeTurn(c) {
		return
	}
	m.turn = a.turns
	m.text.Reset()
	m.calls = nil
	m.last = provider.Event{}
	ctx, cancel := context.WithCancel(a.ctx)
	m.cancel = cancel
	turn, self, root, log := m.turn, c.Self(), c.ActorSystem().Root, a.log
	cands, disp, prep := m.cands, m.disp, a.prep
	turns := append([][]prompt.Message(nil), m.turns...) // completed turns are never changed
	sessDir := a.cfg.Layout.SessionDir(a.spec.Agent, a.spec.Scope, a.spec.Session)
	state := filepath.Join(sessDir, toolctx.StateFileName)
	a.cfg.Procs.Add(1) // the stream is waited for at shutdown like a process
	go func() {
		defer a.cfg.Procs.Done()
		sawBudget, other := false, false
		current := "" // the candidate being tried: prepare runs before its stream, in this goroutine
		load := imageLoader(sessDir)
		// An attached image that cannot be read (missing, changed, not
		// an image) fails the run, naming it: never dropped silently.
		var imgErr error
		// spec: W6 W8 — each candidate gets its own render within its own
		// budget, and so does every turn. The tool
		// context is read again, so a `tsh load` during the run is seen by
		// the next turn.
		prepare := func(model string) (provider.Request, bool, string) {
			if imgErr != nil {
				return provider.Request{}, false, imgErr.Error()
			}
			cd, ok := candidate(prep.Candidates, model)
			if !ok {
				other = true
				return provider.Request{}, false, "not a candidate of this agent"
			}
			if !cd.Usable {
				other = true
				return provider.Request{}, false, cd.Reason
			}
			var tools *toolctx.State
			if st, err := toolctx.ReadState(state); err == nil {
				tools = &st
			} else {
				log.Warn("tool context unreadable; the run's first one is used", "err", err)
			}
			res, err := prep.Render(cd, tools, turns)
			if err != nil {
				var be *runprep.BudgetError
				if errors.As(err, &be) {
					sawBudget = true
				} else {
					other = true
				}
				return provider.Request{}, false, err.Error()
			}
			req, err := request(res.Messages(), load)
			if err != nil {
				imgErr = err
				cancel() // no other candidate is tried: the run fails with this
				return provider.Request{}, false, err.Error()
			}
			root.Send(self, &modelPrepared{turn: turn, warnings: renderWarnings(res)})
			current = model
			return req, true, ""
		}
		_, err := disp.Dispatch(ctx, cands, prepare, func(ev provider.Event) error {
			root.Send(self, &modelEvent{turn: turn, ev: ev, model: current})
			return nil
		}, func(model, status, reason string) {
			if imgErr != nil {
				return // not the candidate's doing
			}
			if status == provider.CandidateFailed {
				other = true
			}
			root.Send(self, &modelCandidate{turn: turn, model: model, status: status, reason: reason}) // spec: W6
		})
		if imgErr != nil {
			err = ipc.WithCode(ipc.CodeImageUnavailable, imgErr)
		}
		root.Send(self, &modelDone{turn: turn, err: err, budget: sawBudget && !other})
	}()
}

// candidate finds model among the prepared candidates.
func candidate(cands []runprep.Candidate, model string) (runprep.Candidate, bool) {
	for _, cd := range cands {
		if cd.Model == model {
			return cd, true
		}
	}
	return runprep.Candidate{}, false
}

func (m *modelEngine) onModelPrepared(c actor.Context, e *modelPrepared) {
	if e.turn != m.turn || m.r.phase.concluded() {
		return
	}
	m.r.warn(c, e.warnings)
}

func (m *modelEngine) onModelEvent(c actor.Context, e *modelEvent) {
	a := m.r
	if e.turn != m.turn || a.phase.concluded() {
		return // spec: X12 — nothing after the conclusion or a cancel
	}
	switch e.ev.Kind {
	case provider.EventDelta:
		m.text.WriteString(e.ev.Text)
		a.emit(c, &ipc.Frame{Type: ipc.TypeDelta, Text: e.ev.Text})
	case provider.EventToolCall:
		m.calls = append(m.calls, e.ev)
	case provider.EventDone:
		m.last = e.ev
		// A server tool ran at the provider, not here: recorded as a
		// warning (a notice that changes nothing), never as a tool_call,
		// which interfaces.md pins to calls ctx runs (spec: X7).
		for _, st := range e.ev.ServerTools {
			a.warn(c, []string{serverToolNote(st)})
		}
		if e.ev.Usage != nil { // Summed over the run's turns, never made up
			// Per model, so a price table can price it (a run's turns may
			// be answered by different candidates).
			a.addUsage(e.model, e.ev.Usage)
		}
	}
}

func (m *modelEngine) onModelCandidate(c actor.Context, e *modelCandidate) {
	if e.turn != m.turn || m.r.phase.concluded() {
		return
	}
	if e.status == provider.CandidateRetrying {
		// A retry changes nothing but the wait: a warning, seen live
		// (candidate frames are for candidates given up on).
		m.r.warn(c, []string{"model " + e.model + ": " + e.reason})
		return
	}
	m.r.emit(c, &ipc.Frame{Type: ipc.TypeCandidate, Model: e.model, Status: e.status, Reason: e.reason})
}

func (m *modelEngine) onModelDone(c actor.Context, e *modelDone) {
	a := m.r
	if e.turn != m.turn || a.phase.concluded() {
		return
	}
	if e.err != nil {
		code := CodeProviderError
		switch {
		case ipc.Code(e.err) == ipc.CodeImageUnavailable:
			code = ipc.CodeImageUnavailable
		case errors.Is(e.err, provider.ErrModelUnavailable) && e.budget:
			code = ipc.CodeLimitExceeded // spec: W8 — no candidate's window holds this dispatch
		case errors.Is(e.err, provider.ErrModelUnavailable):
			code = ipc.CodeModelUnavailable
		}
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(code, e.err)), ipc.StatusError)
		return
	}
	// How the reply ended is never dropped.
	if m.last.Refused() {
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(CodeRefused, "%s", refusalMessage(m.last))), ipc.StatusError)
		return
	}
	if m.last.Truncated() {
		if len(m.calls) > 0 {
			// A call in a cut reply may be cut itself: none of them runs.
			names := make([]string, len(m.calls))
			for i, call := range m.calls {
				names[i] = call.Name
			}
			a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(CodeTruncated,
				"the model's reply was cut at its output limit (stop reason %s) with %d tool call(s) (%s) in it; none was run — raise max_tokens in providers.json or ask for less",
				m.last.StopReason, len(m.calls), strings.Join(names, ", "))), ipc.StatusError)
			return
		}
		a.warn(c, []string{fmt.Sprintf("the reply was cut at the model's output limit (stop reason %s); the text is incomplete", m.last.StopReason)})
	}
	if len(m.calls) == 0 && m.last.StopReason == "pause_turn" {
		// Anthropic paused a long server-tool turn: the reply goes back as
		// it is for the model to continue it (MaxModelTurns bounds this).
		m.paused += m.text.String()
		m.turns = append(m.turns, []prompt.Message{{Role: "assistant", Content: m.text.String(), Blocks: m.last.Content}})
		m.modelTurn(c)
		return
	}
	if len(m.calls) == 0 {
		// The assistant conclusion is the text of the last turn
		// (interfaces.md), with what it said before a pause_turn.
		a.concludeReply(c, m.paused+m.text.String(), 0)
		return
	}
	m.paused = ""
	m.cur = nil
	for i, call := range m.calls {
		msg := prompt.Message{Role: "assistant", CallID: call.CallID, Name: call.Name, Args: call.Args, Extra: call.Extra}
		if i == 0 {
			msg.Blocks = m.last.Content // server tool blocks, thinking: replayed verbatim
		}
		if call.ArgsError != "" {
			msg.Args, msg.Input = nil, call.Input // what the model really sent
		}
		if i == 0 {
			msg.Content = m.text.String()
		}
		m.cur = append(m.cur, msg)
	}
	m.nextModelCall(c)
}

// serverToolNote is the warning recording a tool the provider ran itself.
func serverToolNote(st provider.ServerTool) string {
	in := st.Input
	if len(in) > 200 {
		in = in[:200] + "…"
	}
	return fmt.Sprintf("the provider ran its own server tool %s (%s, input %s); ctx did not run it and records it here only", st.Name, st.ID, strings.ToValidUTF8(in, "\uFFFD"))
}

// refusalMessage says how a reply was refused, with the provider's text.
func refusalMessage(ev provider.Event) string {
	switch {
	case ev.Refusal != "":
		return "the model refused: " + ev.Refusal
	case ev.StopReason == "content_filter":
		return "the provider's content filter stopped the reply (finish_reason content_filter)"
	}
	return fmt.Sprintf("the model declined to answer (stop reason %s)", ev.StopReason)
}

// nextModelCall runs the turn's next tool call through the tool actor, or
// starts the next turn when all are answered.
func (m *modelEngine) nextModelCall(c actor.Context) {
	a := m.r
	if a.phase != phaseRunning {
		return
	}
	if len(m.calls) == 0 {
		m.turns = append(m.turns, m.cur)
		m.cur = nil
		m.modelTurn(c)
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
	if !a.takeCall(c) {
		return
	}
	if call.ArgsError != "" {
		// The frame records what the model really sent; the
		// call fails as invalid and never runs.
		a.emit(c, &ipc.Frame{Type: ipc.TypeToolCall, CallID: id, Name: call.Name, Args: []string{}, Input: call.Input})
		r := &tool.Result{CallID: id, Name: call.Name, Status: envelope.StatusError, Content: "invalid tool input: " + call.ArgsError}
		// spec: X7 — every tool_call gets its one host-written tool_result.
		a.emit(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: r.CallID, Name: r.Name, Status: r.Status, Content: r.Content})
		m.toolResult(c, r)
		return
	}
	a.startTool(c, &envelope.Line{Type: "tool_call", ID: id, Name: call.Name, Args: call.Args})
}

// toolResult feeds a host result back into the conversation.
func (m *modelEngine) toolResult(c actor.Context, r *tool.Result) {
	if m.current != r.CallID {
		return
	}
	// The provider knows the call by its own id.
	m.cur = append(m.cur, prompt.Message{Role: "tool", CallID: m.provID, Name: r.Name, Content: r.Content,
		IsError: r.Status != envelope.StatusOK})
	m.current, m.provID = "", ""
	m.nextModelCall(c)
}
