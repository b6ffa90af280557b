package session

import (
	"encoding/json"
	"slices"

	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/runprep"
	"github.com/cortexfs/ctx/internal/store"
)

// MaxHistory bounds history_messages (X5).
const MaxHistory = envelope.MaxContext

// historyJSON renders earlier runs' conversation as the JSON array string
// of history_messages, newest kept when it must be cut (X5). Durable
// history is never changed.
func historyJSON(msgs []store.Message) string {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
		Name    string `json:"name,omitempty"`
	}
	// Newest first until the cap, then back in order: the cost follows the
	// cap, not the length of the session.
	var tail []json.RawMessage
	size := 2
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		var x msg
		switch m.Role {
		case "user", "assistant":
			x = msg{Role: m.Role, Content: m.Text}
		case "tool":
			x = msg{Role: "tool", Name: m.Name, Content: m.Content}
		default:
			continue
		}
		b, _ := json.Marshal(x)
		if size+len(b)+1 > MaxHistory {
			break
		}
		size += len(b) + 1
		tail = append(tail, b)
	}
	slices.Reverse(tail)
	if len(tail) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tail)
	return string(b)
}

// MaxPromptHistory bounds the history handed to the prompt builder: the
// newest messages up to this much content (far above any window's budget;
// the builder then fits what the window allows, newest first — W9).
const MaxPromptHistory = 64 << 20

// promptHistory is the conversation so far as runprep sees it — exactly
// what `ctx agent prompt` reads from messages.jsonl (R4).
func promptHistory(msgs []store.Message) []runprep.Message {
	i, size := len(msgs), 0
	for i > 0 && size+len(msgs[i-1].Text)+len(msgs[i-1].Content) <= MaxPromptHistory {
		size += len(msgs[i-1].Text) + len(msgs[i-1].Content)
		i--
	}
	return runprep.History(msgs[i:])
}
