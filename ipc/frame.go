// Package ipc is the wire layer shared by the daemon and its clients: the
// JSONL request and frame types, bounded line framing, unix-socket listen and
// dial with peer-credential checks, and the mapping of errors to wire codes.
package ipc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Frame is one host frame (interfaces.md "Socket frames"). The same object is
// sent to clients and, for durable types, appended to events.jsonl.
// Marshal emits exactly the fields its type carries (see fieldsByType), so a
// required field that is zero ("" text, false truncated, empty args) still appears.
type Frame struct {
	Type      string   `json:"type"`
	Session   string   `json:"session,omitempty"`
	Seq       int64    `json:"seq,omitempty"`
	TS        string   `json:"ts,omitempty"`
	Run       string   `json:"run,omitempty"`
	ID        string   `json:"id,omitempty"`
	Op        string   `json:"op,omitempty"`
	Text      string   `json:"text,omitempty"`
	CallID    string   `json:"call_id,omitempty"`
	Name      string   `json:"name,omitempty"`
	Args      []string `json:"args,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	Decision  string   `json:"decision,omitempty"`
	Status    string   `json:"status,omitempty"`
	Content   string   `json:"content,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	Code      string   `json:"code,omitempty"`
	Message   string   `json:"message,omitempty"`
	Model     string   `json:"model,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	ActiveRun *string  `json:"active_run,omitempty"`
	Digest    string   `json:"digest,omitempty"`
	Prompt    string   `json:"prompt,omitempty"`
	Version   string   `json:"version,omitempty"`
	Layer     string   `json:"layer,omitempty"`
	Replay    bool     `json:"replay,omitempty"`

	// Input is a model's tool input exactly as sent, on a tool_call whose
	// input was not a valid argv.
	Input string `json:"input,omitempty"`
	// Usage is a model run's token use on its done frame: the sum over the
	// run's turns of what the providers reported (absent when none did;
	// ).
	Usage *Usage `json:"usage,omitempty"`
	// UsageByModel is the same usage per candidate that answered
	// (provider/model), so a price table can price it; absent with Usage.
	UsageByModel map[string]*Usage `json:"usage_by_model,omitempty"`
	// MCP is, on an approval_request for an MCP tool, what the person
	// decides on: server, tool, arguments and the tool's annotations.
	//The annotations are hints: they grant nothing.
	MCP *MCPCall `json:"mcp,omitempty"`
	// Images, on a user frame, are the images its message attaches: the
	// references the send carried (sha256, media type, name, size), never
	// the bytes, which stay in the session's blob store.
	Images []Image `json:"images,omitempty"`
}

// MCPCall describes one MCP tool call for a person.
type MCPCall struct {
	Server      string          `json:"server"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	ReadOnly    bool            `json:"read_only_hint,omitempty"`
	Destructive *bool           `json:"destructive_hint,omitempty"`
}

// Frame types.
const (
	TypeUser            = "user"
	TypeStart           = "start"
	TypeDelta           = "delta"
	TypeToolCall        = "tool_call"
	TypeApprovalRequest = "approval_request"
	TypeApproval        = "approval"
	TypeToolResult      = "tool_result"
	TypeAssistant       = "assistant"
	TypeError           = "error"
	TypeCancelled       = "cancelled"
	TypeCandidate       = "candidate"
	TypeDone            = "done"
	TypeWarning         = "warning"
	// Transport frames: never appended to events.jsonl.
	TypePong     = "pong"
	TypeCaughtUp = "caught_up"
	TypeAck      = "ack"
)

// fieldsByType lists, per type, the fields emitted even when zero.
// Optional extras (digest, prompt, layer, replay) are emitted when set.
var fieldsByType = map[string][]string{
	TypeUser:            {"run", "id", "text"},
	TypeStart:           {"run", "id", "op"},
	TypeDelta:           {"run", "text"},
	TypeToolCall:        {"run", "call_id", "name", "args"},
	TypeApprovalRequest: {"run", "id", "name", "args", "timeout_ms"},
	TypeApproval:        {"run", "id", "decision"},
	TypeToolResult:      {"run", "call_id", "name", "status", "content", "truncated"},
	TypeAssistant:       {"run", "text"},
	TypeError:           {"code", "message"},
	TypeCancelled:       {"run"},
	TypeCandidate:       {"run", "model", "status", "reason"},
	TypeDone:            {"run", "id", "status"},
	TypeWarning:         {"run", "message"},
	TypeCaughtUp:        {"active_run"},
	TypePong:            {"version"},
	TypeAck:             {"op", "run"},
}

// IsTransport reports whether frames of this type are never made durable.
func (f *Frame) IsTransport() bool {
	switch f.Type {
	case TypePong, TypeCaughtUp, TypeAck:
		return true
	case TypeError:
		return f.Run == "" && (f.Code == CodeBadRequest || f.Code == CodeTooLarge || f.Code == CodeBusy)
	}
	return false
}

// IsConclusion reports whether the frame concludes a run (before its done).
func (f *Frame) IsConclusion() bool {
	return f.Type == TypeAssistant || f.Type == TypeError || f.Type == TypeCancelled
}

// MarshalJSON writes the frame with its type's fields in a stable order.
func (f *Frame) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	writeString(&b, f.Type)
	if f.Session != "" {
		b.WriteString(`,"session":`)
		writeString(&b, f.Session)
	}
	if f.Seq != 0 {
		b.WriteString(`,"seq":`)
		b.WriteString(strconv.FormatInt(f.Seq, 10))
	}
	if f.TS != "" {
		b.WriteString(`,"ts":`)
		writeString(&b, f.TS)
	}
	want := map[string]bool{}
	for _, k := range fieldsByType[f.Type] {
		want[k] = true
	}
	field := func(name string, set bool, write func()) {
		if !want[name] && !set {
			return
		}
		b.WriteString(`,"` + name + `":`)
		write()
	}
	str := func(name, v string) { field(name, v != "", func() { writeString(&b, v) }) }
	str("run", f.Run)
	str("id", f.ID)
	str("op", f.Op)
	str("call_id", f.CallID)
	str("name", f.Name)
	field("args", f.Args != nil, func() {
		args := f.Args
		if args == nil {
			args = []string{}
		}
		j, _ := json.Marshal(args)
		b.Write(j)
	})
	str("input", f.Input)
	field("timeout_ms", f.TimeoutMS != 0, func() { b.WriteString(strconv.FormatInt(f.TimeoutMS, 10)) })
	str("decision", f.Decision)
	str("status", f.Status)
	str("model", f.Model)
	str("reason", f.Reason)
	str("code", f.Code)
	str("message", f.Message)
	str("text", f.Text)
	str("content", f.Content)
	field("images", len(f.Images) > 0, func() {
		j, _ := json.Marshal(f.Images)
		b.Write(j)
	})
	field("truncated", f.Truncated, func() { b.WriteString(strconv.FormatBool(f.Truncated)) })
	field("active_run", f.ActiveRun != nil, func() {
		if f.ActiveRun == nil {
			b.WriteString("null")
		} else {
			writeString(&b, *f.ActiveRun)
		}
	})
	str("version", f.Version)
	str("digest", f.Digest)
	str("prompt", f.Prompt)
	str("layer", f.Layer)
	field("usage", f.Usage != nil, func() {
		j, _ := json.Marshal(f.Usage)
		b.Write(j)
	})
	field("usage_by_model", len(f.UsageByModel) > 0, func() {
		j, _ := json.Marshal(f.UsageByModel) // map keys are sorted: the line is deterministic
		b.Write(j)
	})
	field("mcp", f.MCP != nil, func() {
		j, _ := json.Marshal(f.MCP)
		b.Write(j)
	})
	if f.Replay {
		b.WriteString(`,"replay":true`)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Line marshals the frame as one JSONL line (with the trailing newline).
func (f *Frame) Line() []byte {
	b, _ := f.MarshalJSON()
	return append(b, '\n')
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // never fails for a string; invalid UTF-8 becomes U+FFFD
	b.Write(enc)
}

// Now is the timestamp format of every frame: RFC 3339 with milliseconds, UTC.
func Now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// MarkReplay returns a copy of a stored frame line with "replay":true added
// (P4). line is one JSON object with or without its newline.
func MarkReplay(line []byte) []byte {
	line = bytes.TrimRight(line, "\n")
	if bytes.Contains(line, []byte(`"replay":true`)) || len(line) < 2 {
		return append(append([]byte{}, line...), '\n')
	}
	out := make([]byte, 0, len(line)+16)
	out = append(out, line[:len(line)-1]...)
	out = append(out, `,"replay":true}`...)
	return append(out, '\n')
}

// Usage is token use (input, output, cache read and write tokens).
type Usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read,omitempty"`
	CacheWrite int64 `json:"cache_write,omitempty"`
}
