// Package acpbridge makes a ctx agent an Agent Client Protocol agent for an
// editor (`ctx acp AGENT`): ACP sessions are ctx sessions,
// session/prompt is the pinned `send` op, session/load is `resume`,
// session/cancel is `cancel`, and an approval_request becomes
// session/request_permission whose answer goes back as the pinned `approve`
// line. The JSON-RPC is github.com/coder/acp-go-sdk; this package only maps.
package acpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/ipc"
)

// ErrUnsupportedContent is a prompt block ctx cannot pass on honestly
// (images and audio: the initialize answer says so).
var ErrUnsupportedContent = errors.New("unsupported prompt content")

// PromptText joins a prompt's blocks into the one `input` string of a send:
// text blocks as they are, resource links as "@URI" lines, embedded text
// resources as their text under a "@URI" line. Images, audio and blob
// resources are refused with ErrUnsupportedContent.
func PromptText(blocks []acp.ContentBlock) (string, error) {
	var parts []string
	for i, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			parts = append(parts, "@"+b.ResourceLink.Uri)
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			parts = append(parts, "@"+r.Uri+"\n"+r.Text)
		case b.Image != nil:
			return "", fmt.Errorf("prompt block %d: images: %w", i, ErrUnsupportedContent)
		case b.Audio != nil:
			return "", fmt.Errorf("prompt block %d: audio: %w", i, ErrUnsupportedContent)
		default:
			return "", fmt.Errorf("prompt block %d: %w", i, ErrUnsupportedContent)
		}
	}
	return strings.Join(parts, "\n"), nil
}

// RequestID derives the ctx request id of a prompt from its ACP session and
// a stable per-prompt key, so that the same prompt sent again maps to the
// same id and the daemon replays it instead of running it twice (P4). The
// result always satisfies ipc.CheckID.
func RequestID(session, key string) string {
	h := sha256.Sum256([]byte(session + "\x00" + key))
	return "acp-" + hex.EncodeToString(h[:12])
}

// PromptKey is the per-prompt key of RequestID: the editor's own message id
// when it sends one (ACP messageId, or `_meta["ctx/requestId"]`), else the
// turn number in the session and a digest of the prompt text.
func PromptKey(p acp.PromptRequest, turn int, text string) string {
	if p.MessageId != nil && *p.MessageId != "" {
		return "msg:" + *p.MessageId
	}
	if v, ok := p.Meta["ctx/requestId"].(string); ok && v != "" {
		return "meta:" + v
	}
	return TurnKey(turn, text)
}

// TurnKey is the fallback key: turn number and the text's digest.
func TurnKey(turn int, text string) string {
	h := sha256.Sum256([]byte(text))
	return "turn:" + strconv.Itoa(turn) + ":" + hex.EncodeToString(h[:8])
}

// ToolKind guesses the ACP kind of a ctx tool call for the editor's icon.
// It is presentation only: authority never depends on it.
func ToolKind(name string, args []string) acp.ToolKind {
	tool := name
	if name == "tsh" && len(args) >= 2 && args[0] == "call" {
		tool = args[1]
	}
	switch tool {
	case "read", "ls", "cat":
		return acp.ToolKindRead
	case "grep", "glob", "find", "walk":
		return acp.ToolKindSearch
	case "edit", "write", "apply_patch", "applypatch":
		return acp.ToolKindEdit
	case "bash", "sh", "exec":
		return acp.ToolKindExecute
	case "fetch":
		return acp.ToolKindFetch
	}
	return acp.ToolKindOther
}

// ToolTitle is the one-line title of a tool call: its name and argv.
func ToolTitle(name string, args []string) string {
	t := strings.TrimSpace(name + " " + strings.Join(args, " "))
	if len(t) > 200 {
		t = t[:200] + "…"
	}
	return t
}

// ToolStatus maps a tool_result status to the ACP tool call status.
func ToolStatus(status string) acp.ToolCallStatus {
	if status == "ok" {
		return acp.ToolCallStatusCompleted
	}
	return acp.ToolCallStatusFailed
}

// Updates maps one ctx frame to the session/update notifications an editor
// sees. history is true while replaying a session (session/load): the
// user's own messages and past errors are shown then; during a prompt the
// editor already has the user's text and an error ends the prompt instead.
// Frames with nothing to show (start, done, candidate, approval_request,
// transport frames) map to none; approval requests are asked separately.
func Updates(f *ipc.Frame, history bool) []acp.SessionUpdate {
	switch f.Type {
	case ipc.TypeUser:
		if history {
			return []acp.SessionUpdate{acp.UpdateUserMessageText(f.Text)}
		}
	case ipc.TypeDelta:
		if f.Text != "" {
			return []acp.SessionUpdate{acp.UpdateAgentMessageText(f.Text)}
		}
	case ipc.TypeToolCall:
		args := f.Args
		if args == nil {
			args = []string{}
		}
		return []acp.SessionUpdate{acp.StartToolCall(acp.ToolCallId(f.CallID), ToolTitle(f.Name, args),
			acp.WithStartKind(ToolKind(f.Name, args)),
			acp.WithStartStatus(acp.ToolCallStatusPending),
			acp.WithStartRawInput(map[string]any{"name": f.Name, "args": args}))}
	case ipc.TypeApproval:
		if f.Decision == ipc.DecisionAllowOnce {
			return []acp.SessionUpdate{acp.UpdateToolCall(acp.ToolCallId(f.ID), acp.WithUpdateStatus(acp.ToolCallStatusInProgress))}
		}
	case ipc.TypeToolResult:
		return []acp.SessionUpdate{acp.UpdateToolCall(acp.ToolCallId(f.CallID),
			acp.WithUpdateStatus(ToolStatus(f.Status)),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(f.Content))}),
			acp.WithUpdateRawOutput(map[string]any{"status": f.Status, "truncated": f.Truncated}))}
	case ipc.TypeError:
		if history && f.Run != "" {
			return []acp.SessionUpdate{acp.UpdateAgentMessageText(fmt.Sprintf("\n[error %s: %s]\n", f.Code, f.Message))}
		}
	case ipc.TypeCancelled:
		if history {
			return []acp.SessionUpdate{acp.UpdateAgentMessageText("\n[cancelled]\n")}
		}
	case ipc.TypeWarning:
		if f.Message != "" && !history {
			return []acp.SessionUpdate{acp.UpdateAgentThoughtText("ctx: " + f.Message)}
		}
	}
	return nil
}

// Outcome is how a prompt ended, from its conclusion and done frames.
type Outcome struct {
	Stop acp.StopReason
	Err  *acp.RequestError // non-nil: the prompt answers this error instead
}

// Conclude maps a run's done status and its error conclusion (nil when
// none) to the ACP stop reason: ok → end_turn, cancelled → cancelled, an
// error with limit_exceeded → max_turn_requests, denied → refusal, any
// other error → a JSON-RPC error carrying ctx's code and message.
func Conclude(status string, errFrame *ipc.Frame) Outcome {
	switch status {
	case "ok":
		return Outcome{Stop: acp.StopReasonEndTurn}
	case "cancelled":
		return Outcome{Stop: acp.StopReasonCancelled}
	}
	code, msg := ipc.CodeInternal, "the run ended in error"
	if errFrame != nil {
		code, msg = errFrame.Code, errFrame.Message
	}
	switch code {
	case ipc.CodeLimitExceeded:
		return Outcome{Stop: acp.StopReasonMaxTurnRequests}
	case ipc.CodeDenied:
		return Outcome{Stop: acp.StopReasonRefusal}
	}
	return Outcome{Err: RequestError(code, msg)}
}

// RequestError maps a ctx error code to a JSON-RPC error: the request's
// own faults (bad_request, too_large, bad_name, id_conflict) are invalid
// params, everything else an internal error; data carries ctx's code and
// message so an editor can show them.
func RequestError(code, msg string) *acp.RequestError {
	data := map[string]any{"ctx_code": code, "message": msg}
	var e *acp.RequestError
	switch code {
	case ipc.CodeBadRequest, ipc.CodeTooLarge, ipc.CodeBadName, ipc.CodeIDConflict:
		e = acp.NewInvalidParams(data)
	default:
		e = acp.NewInternalError(data)
	}
	e.Message = "ctx: " + code + ": " + msg
	return e
}
