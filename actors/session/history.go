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
	_, tail := historyTail(msgs)
	if len(tail) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tail)
	return string(b)
}

// historyTail returns the newest messages of history_messages that fit
// MaxHistory, in order, and the index in msgs of the oldest one looked at.
// Newest first until the cap: the cost follows the cap, not the length of
// the session.
func historyTail(msgs []store.Message) (start int, tail []json.RawMessage) {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
		Name    string `json:"name,omitempty"`
	}
	size := 2
	start = len(msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		var x msg
		switch m.Role {
		case "user", "assistant":
			x = msg{Role: m.Role, Content: m.Text}
		case "tool":
			x = msg{Role: "tool", Name: m.Name, Content: m.Content}
		default:
			start = i
			continue
		}
		b, _ := json.Marshal(x)
		if size+len(b)+1 > MaxHistory {
			break
		}
		size += len(b) + 1
		tail = append(tail, b)
		start = i
	}
	slices.Reverse(tail)
	return start, tail
}

// MaxPromptHistory bounds the history handed to the prompt builder: the
// newest messages up to this much content (far above any window's budget;
// the builder then fits what the window allows, newest first — W9).
const MaxPromptHistory = 64 << 20

// promptHistory is the conversation so far as runprep sees it — exactly
// what `ctx agent prompt` reads from messages.jsonl (R4).
func promptHistory(msgs []store.Message) []runprep.Message {
	return runprep.History(msgs[promptStart(msgs):])
}

// promptStart is the index of the oldest message promptHistory hands on:
// the newest messages up to MaxPromptHistory of content.
func promptStart(msgs []store.Message) int {
	i, size := len(msgs), 0
	for i > 0 && size+msgSize(&msgs[i-1]) <= MaxPromptHistory {
		size += msgSize(&msgs[i-1])
		i--
	}
	return i
}

func msgSize(m *store.Message) int { return len(m.Text) + len(m.Content) }

// addMessage appends a committed message to the session's history and,
// once the history holds a quarter more than MaxPromptHistory, drops the
// messages neither history_messages nor the prompt can reach any more: an
// active session's memory is bounded, and what both see is unchanged.
// The log and messages.jsonl keep every message.
func (a *Actor) addMessage(m store.Message) {
	a.msgs = append(a.msgs, m)
	a.msgsSize += msgSize(&m)
	if a.msgsSize > MaxPromptHistory+MaxPromptHistory/4 {
		a.msgs, a.msgsSize = trimHistory(a.msgs)
	}
}

// trimHistory keeps the messages from the oldest one historyJSON or
// promptHistory can use, in a new array so the old one is freed.
func trimHistory(msgs []store.Message) ([]store.Message, int) {
	h, _ := historyTail(msgs)
	from := min(h, promptStart(msgs))
	kept := slices.Clone(msgs[from:])
	size := 0
	for i := range kept {
		size += msgSize(&kept[i])
	}
	return kept, size
}
