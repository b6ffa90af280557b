// Package envelope implements sdk-envelope-v1: the one JSON object the host
// writes to an executable agent's stdin (spec: X2–X5, X10) and the
// parser of the JSON lines the agent writes back (X8, X9).
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/jsonobj"
)

// Schema is the envelope's schema value (X3).
const Schema = "cortexfs.agent-invocation/v1"

// Bounds. spec: X2, X5
const (
	MaxEnvelope = 1 << 20  // including the newline
	MaxContext  = 64 << 10 // each context string
	MaxContent  = 16 << 10 // observation.content
)

// ErrInvalid is wrapped by every envelope validation failure.
var ErrInvalid = errors.New("invalid envelope")

// Observation is the previous host result (X4).
type Observation struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Content    string `json:"content"`
	Truncated  bool   `json:"truncated"`
}

// Envelope is the invocation object; field order is the wire order.
type Envelope struct {
	Schema          string       `json:"schema"`
	Run             string       `json:"run"`
	Step            int          `json:"step"`
	Input           string       `json:"input"`
	HistoryMessages string       `json:"history_messages"`
	ToolContext     string       `json:"tool_context"`
	Observation     *Observation `json:"observation"`
}

// Encode validates e and returns its exact stdin bytes: the object and one LF.
func Encode(e *Envelope) ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil { // Encode appends exactly one '\n'
		return nil, fmt.Errorf("envelope: %w", err)
	}
	if b.Len() > MaxEnvelope {
		return nil, fmt.Errorf("envelope of %d bytes exceeds %d: %w", b.Len(), MaxEnvelope, ErrInvalid)
	}
	return b.Bytes(), nil
}

func (e *Envelope) check() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("envelope: "+f+": %w", append(a, ErrInvalid)...) }
	if e.Schema != Schema {
		return bad("schema %q", e.Schema)
	}
	if e.Run == "" || e.Step < 0 || !utf8.ValidString(e.Run) {
		return bad("run %q step %d", e.Run, e.Step)
	}
	for name, s := range map[string]string{"input": e.Input, "history_messages": e.HistoryMessages, "tool_context": e.ToolContext} {
		if !utf8.ValidString(s) {
			return bad("%s is not valid UTF-8", name)
		}
		if name != "input" && len(s) > MaxContext { // spec: X5
			return bad("%s of %d bytes exceeds %d", name, len(s), MaxContext)
		}
	}
	var hist []json.RawMessage
	if err := json.Unmarshal([]byte(e.HistoryMessages), &hist); err != nil || hist == nil && e.HistoryMessages != "[]" {
		return bad("history_messages must be a JSON array encoded as a string") // spec: X3
	}
	if (e.Step == 0) != (e.Observation == nil) { // spec: X4
		return bad("step %d with observation %v", e.Step, e.Observation != nil)
	}
	if o := e.Observation; o != nil {
		if len(o.Content) > MaxContent || !utf8.ValidString(o.Content) {
			return bad("observation.content must be valid UTF-8 of at most %d bytes", MaxContent)
		}
		if o.ToolCallID == "" || o.Name == "" || o.Status == "" ||
			!utf8.ValidString(o.ToolCallID) || !utf8.ValidString(o.Name) || !utf8.ValidString(o.Status) {
			return bad("observation needs tool_call_id, name and status")
		}
	}
	return nil
}

// Decode parses and validates stdin bytes as an agent would (exactly one
// object, one LF, nothing else; exactly the seven fields). wantRun and
// wantStep are the launch environment's CTX_RUN and CTX_STEP (X4).
func Decode(b []byte, wantRun string, wantStep int) (*Envelope, error) {
	bad := func(f string, a ...any) (*Envelope, error) {
		return nil, fmt.Errorf("envelope: "+f+": %w", append(a, ErrInvalid)...)
	}
	if len(b) > MaxEnvelope {
		return bad("%d bytes exceeds %d", len(b), MaxEnvelope)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' || bytes.IndexByte(b[:len(b)-1], '\n') >= 0 {
		return bad("must be one JSON object followed by one newline")
	}
	body := b[:len(b)-1]
	if !utf8.Valid(body) {
		return bad("not valid UTF-8")
	}
	raw, err := jsonobj.Keys(body)
	if err != nil {
		return bad("not one JSON object of distinct keys: %v", err)
	}
	want := []string{"schema", "run", "step", "input", "history_messages", "tool_context", "observation"}
	if len(raw) != len(want) {
		return bad("want exactly the fields %v", want)
	}
	for _, k := range want {
		if _, ok := raw[k]; !ok {
			return bad("missing field %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var e Envelope
	if err := dec.Decode(&e); err != nil {
		return bad("%v", err)
	}
	if dec.More() {
		return bad("trailing data")
	}
	if string(raw["observation"]) != "null" {
		o, err := jsonobj.Keys(raw["observation"])
		if err != nil || !jsonobj.HasExactly(o, "tool_call_id", "name", "status", "content", "truncated") {
			return bad("observation must have exactly tool_call_id, name, status, content, truncated")
		}
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	if e.Run != wantRun || e.Step != wantStep {
		return bad("run/step %s/%d differ from the launch environment %s/%d", e.Run, e.Step, wantRun, wantStep)
	}
	return &e, nil
}
