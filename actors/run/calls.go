package run

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/ipc"
)

// Tool calls of a run: each one a tool actor, its approval and its result.

// startTool records the call and hands it to a tool actor. spec: X8
func (a *Actor) startTool(c actor.Context, call *envelope.Line) {
	a.toolCall = call
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolCall, CallID: call.ID, Name: call.Name, Args: nonNil(call.Args)})
	a.cfg.Hit("run.tool_call")
	a.toolPID = c.Spawn(tool.Props(a.cfg, tool.Call{View: a.view, CallID: call.ID, Name: call.Name, Args: call.Args,
		Ask: a.def.Approval == "ask", Group: a.group}))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// onToolResult acts in phase running, on the call in flight (a cancel
// writes that call's result itself).
func (a *Actor) onToolResult(c actor.Context, r *tool.Result) {
	if a.toolCall == nil || r.CallID != a.toolCall.ID || a.phase.concluded() {
		return
	}
	if a.toolPID != nil {
		c.Stop(a.toolPID)
	}
	a.toolCall, a.toolPID = nil, nil
	// A sandbox whose workspace the run made read-only (it planted files
	// past the protected-path walk's bound) is said, once per run.
	a.warn(c, r.Warnings)
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: r.CallID, Name: r.Name, Status: r.Status,
		Content: r.Content, Truncated: r.Truncated, Layer: r.Layer})
	a.eng.toolResult(c, r)
}

// onChildGone: a tool actor that stopped without a result crashed; the call
// is reported failed, never run again.
func (a *Actor) onChildGone(c actor.Context, m *actor.Terminated) {
	if a.toolPID == nil || !m.Who.Equal(a.toolPID) || a.toolCall == nil {
		return
	}
	a.onToolResult(c, &tool.Result{CallID: a.toolCall.ID, Name: a.toolCall.Name, Status: envelope.StatusError,
		Content: "the tool call failed inside the runtime and was not retried"})
}

func (a *Actor) onNeedApproval(c actor.Context, m *tool.NeedApproval) {
	if a.toolCall == nil || a.toolCall.ID != m.CallID || a.phase.concluded() {
		return
	}
	c.Request(c.Parent(), &ApprovalNeeded{Run: a.spec.RunID, CallID: m.CallID, Name: a.toolCall.Name, Args: nonNil(a.toolCall.Args), MCP: m.MCP})
}

func (a *Actor) onApprovalAnswer(c actor.Context, m *ApprovalAnswer) {
	if a.eng.receive(c, m) {
		return // an ACP agent's own question
	}
	if a.toolCall == nil || a.toolCall.ID != m.CallID || a.toolPID == nil {
		return
	}
	c.Send(a.toolPID, &tool.Approved{Decision: m.Decision, Reason: m.Reason})
}

// endToolCall stops the tool call in flight, if any, and writes its
// result before the run's end: no tool_call is left without one (X7).
func (a *Actor) endToolCall(c actor.Context, status, content string) {
	if a.toolCall == nil {
		return
	}
	if a.toolPID != nil {
		c.Stop(a.toolPID)
	}
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: a.toolCall.ID, Name: a.toolCall.Name,
		Status: status, Content: content})
	a.toolCall, a.toolPID = nil, nil
}
