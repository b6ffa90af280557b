package acpclient

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/ipc"
)

// Bounds on what a reported tool call's record carries.
const (
	// MaxArg is one detail of a reported call (a command, a path) in its
	// tool_call frame's args.
	MaxArg = 1 << 10
	// MaxArgs is how many details beyond kind and title are kept.
	MaxArgs = 8
	// MaxRawInput is the agent's rawInput kept, as JSON, on the frame.
	MaxRawInput = 4 << 10
)

// inputKeys are the rawInput fields that say what a call did, in the order
// they are listed: the command a shell tool ran, the paths a file tool
// touched, what a search looked for. Agents name them differently
// (Claude Code: command, file_path, pattern; OpenCode: command, filePath).
var inputKeys = []string{"command", "cmd", "argv", "path", "file_path", "filePath", "notebook_path", "paths",
	"pattern", "glob", "include", "query", "url"}

// call is what the agent reported of one tool call so far.
type call struct {
	seq     int
	kind    string
	title   string
	input   any
	locs    []string
	emitted bool // its tool_call frame was sent
	ended   bool // its tool_result frame was sent
}

// detailed: the call says what it does (an input or a location).
func (c *call) detailed() bool { return len(c.details()) > 0 }

// details are the strings after kind and title in the tool_call frame's
// args: the rawInput fields of inputKeys, then the locations not already
// named, each bounded.
func (c *call) details() []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] || len(out) >= MaxArgs {
			return
		}
		seen[s] = true
		s, _ = cut(s, MaxArg)
		out = append(out, s)
	}
	if m, ok := c.input.(map[string]any); ok {
		for _, k := range inputKeys {
			switch v := m[k].(type) {
			case string:
				add(v)
			case []any:
				parts := make([]string, 0, len(v))
				for _, e := range v {
					if s, ok := e.(string); ok {
						parts = append(parts, s)
					}
				}
				if k == "paths" {
					for _, p := range parts {
						add(p)
					}
				} else {
					add(strings.Join(parts, " "))
				}
			}
		}
	}
	for _, l := range c.locs {
		add(l)
	}
	return out
}

// frame is the call's tool_call frame: name "acp", args [kind, title,
// details…], input the rawInput as JSON (bounded).
func (c *call) frame(id string) *ipc.Frame {
	kind := c.kind
	if kind == "" {
		kind = string(acp.ToolKindOther)
	}
	f := &ipc.Frame{Type: ipc.TypeToolCall, CallID: id, Name: "acp", Args: append([]string{kind, c.title}, c.details()...)}
	if c.input != nil {
		if b, err := json.Marshal(c.input); err == nil && string(b) != "{}" && string(b) != "null" {
			f.Input, _ = cut(string(b), MaxRawInput)
		}
	}
	return f
}

func (c *call) merge(kind, title string, input any, locs []acp.ToolCallLocation) {
	if kind != "" {
		c.kind = kind
	}
	if title != "" {
		c.title = title
	}
	if !emptyInput(input) {
		c.input = input
	}
	for _, l := range locs {
		if l.Path != "" {
			c.locs = append(c.locs, l.Path)
		}
	}
}

func emptyInput(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case string:
		return x == ""
	}
	return false
}

// toolCall maps a tool_call or tool_call_update. A call that is only
// pending and says nothing yet of what it does (agents stream the input
// after announcing the call) is recorded once it says more, starts
// (in_progress), ends, or the agent asks for a terminal or a permission
// (Flush); the frame then carries what it said.
func (c *Client) toolCall(id string, status acp.ToolCallStatus, kind, title string, input any, locs []acp.ToolCallLocation,
	content []acp.ToolCallContent, output any) []*ipc.Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.calls[id]
	if k == nil {
		c.seq++
		k = &call{seq: c.seq}
		c.calls[id] = k
	}
	k.merge(kind, title, input, locs)
	var out []*ipc.Frame
	if !k.emitted && (k.detailed() || status == acp.ToolCallStatusInProgress || status == acp.ToolCallStatusCompleted || status == acp.ToolCallStatusFailed) {
		k.emitted = true
		out = append(out, k.frame(id))
	}
	if (status == acp.ToolCallStatusCompleted || status == acp.ToolCallStatusFailed) && !k.ended {
		k.ended = true
		st := "ok"
		if status == acp.ToolCallStatusFailed {
			st = "error"
		}
		text := contentText(content)
		if strings.TrimSpace(text) == "" {
			text = outputText(output)
		}
		text, trunc := cut(text, MaxContent)
		out = append(out, &ipc.Frame{Type: ipc.TypeToolResult, CallID: id, Name: "acp", Status: st, Content: text, Truncated: trunc})
	}
	return out
}

// Flush records every call announced but not yet recorded, in the order
// the agent announced them: before a terminal or permission request (which
// may belong to one of them) and when the prompt ends.
func (c *Client) Flush() {
	c.mu.Lock()
	var ids []string
	for id, k := range c.calls {
		if !k.emitted && !k.ended {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return c.calls[ids[i]].seq < c.calls[ids[j]].seq })
	var out []*ipc.Frame
	for _, id := range ids {
		c.calls[id].emitted = true
		out = append(out, c.calls[id].frame(id))
	}
	c.mu.Unlock()
	for _, f := range out {
		c.h.Frame(f)
	}
}

// outputText is a result told in rawOutput when content is empty: a
// string, content blocks ({type:"text", text}), or an object with
// stdout/stderr/output/text/content/error fields.
func outputText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, e := range x {
			b.WriteString(outputText(e))
		}
		return b.String()
	case map[string]any:
		var parts []string
		for _, k := range []string{"stdout", "output", "text", "content", "result", "stderr", "error", "message"} {
			if s := outputText(x[k]); strings.TrimSpace(s) != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) == 0 {
			if code, ok := x["exitCode"]; ok {
				return fmt.Sprintf("exit code %v", code)
			}
			if code, ok := x["exit_code"]; ok {
				return fmt.Sprintf("exit code %v", code)
			}
		}
		return strings.Join(parts, "\n")
	case float64, bool:
		return fmt.Sprint(x)
	}
	return ""
}
