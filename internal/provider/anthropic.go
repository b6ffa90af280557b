package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// AnthropicVersion is the anthropic-version header sent with every request.
const AnthropicVersion = "2023-06-01"

// Anthropic streams from the Messages API: POST {base_url}/v1/messages with
// stream:true (https://docs.anthropic.com/en/api/messages-streaming).
type Anthropic struct {
	ep        endpoint
	maxTokens int
}

var _ Provider = (*Anthropic)(nil)

// NewAnthropic builds the provider of one resolved entry. The base URL has no
// /v1, as ANTHROPIC_BASE_URL in the official SDKs.
func NewAnthropic(pc ProviderConfig) *Anthropic {
	return &Anthropic{
		ep:        newEndpoint(pc, strings.TrimRight(pc.BaseURL, "/")+"/v1/messages"),
		maxTokens: pc.MaxTokens,
	}
}

// CloseIdleConnections releases idle keep-alive connections.
func (a *Anthropic) CloseIdleConnections() { a.ep.client.CloseIdleConnections() }

// Stream runs one turn.
func (a *Anthropic) Stream(ctx context.Context, req Request, emit func(Event) error) error {
	body, err := a.encode(req)
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("anthropic-version", AnthropicVersion)
	if !a.ep.key.IsZero() {
		h.Set("x-api-key", a.ep.key.Reveal())
	}
	s, err := a.ep.open(ctx, body, h)
	if err != nil {
		return err
	}
	defer s.Close()
	dec := &anthropicDecoder{name: a.ep.name, redact: a.ep.redact}
	return s.pump("message_stop", dec.event, guard(ctx, emit), nil)
}

// guard stops emitting once ctx is done (spec: X12) and marks the caller's
// own errors so they are returned unchanged.
func guard(ctx context.Context, emit func(Event) error) func(Event) error {
	return func(ev Event) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := emit(ev); err != nil {
			return &emitError{err}
		}
		return nil
	}
}

// emitError carries an error returned by the caller's emit.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

// Wire types of the Messages API request.
type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"` // spec: W11 — configured, never derived from the window
	System    string             `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools,omitempty"`
	Stream    bool               `json:"stream"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// encode renders the request. Consecutive messages of one API role merge into
// one message; tool results travel as tool_result blocks of a user message,
// ahead of any user text (the API requires them first).
func (a *Anthropic) encode(req Request) ([]byte, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = a.maxTokens
	}
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	out := anthropicRequest{Model: req.Model, MaxTokens: maxTokens, System: req.System, Stream: true, Messages: []anthropicMessage{}}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(ToolInputSchema)})
	}
	for i, m := range req.Messages {
		var role string
		var blocks []anthropicBlock
		switch m.Role {
		case RoleUser:
			role = "user"
			if m.Text != "" {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Text})
			}
		case RoleAssistant:
			role = "assistant"
			if m.Text != "" {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Text})
			}
			if m.ToolCallID != "" {
				blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: m.ToolCallID, Name: m.ToolName, Input: anthropicInput(m)})
			}
		case RoleTool:
			role = "user"
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("%s: message %d: tool result without a call id", a.ep.name, i)
			}
			blocks = append(blocks, anthropicBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Text, IsError: m.IsError})
		default:
			return nil, fmt.Errorf("%s: message %d: unknown role %q", a.ep.name, i, m.Role)
		}
		if len(blocks) == 0 {
			continue // the API refuses empty content
		}
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			continue
		}
		out.Messages = append(out.Messages, anthropicMessage{Role: role, Content: blocks})
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", a.ep.name, err)
	}
	return body, nil
}

// anthropicInput is a tool_use block's input: the model's own input when
// the call carries it (issue 16 item 9) — verbatim when it is a JSON object,
// the only input the API accepts back; otherwise the text under "input_text"
// so the model still sees what it sent — else the argv as {"args":[...]}.
func anthropicInput(m Message) json.RawMessage {
	if m.ToolInput == "" {
		return encodeArgs(m.ToolArgs)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(m.ToolInput), &obj) == nil && obj != nil {
		return json.RawMessage(m.ToolInput)
	}
	b, _ := json.Marshal(map[string]string{"input_text": strings.ToValidUTF8(m.ToolInput, "\uFFFD")})
	return b
}

// anthropicDecoder turns the Messages stream into Events.
type anthropicDecoder struct {
	name   string
	redact func(string) string // removes the key from server text; nil in table tests
	blocks map[int]*anthropicBlockState
	order  []*anthropicBlockState // blocks in start order
	calls  []Event
	stop   string
	usage  *Usage // as reported; nil when nothing was
}

type anthropicBlockState struct {
	kind    string // text, tool_use, or anything else (ignored)
	id      string
	name    string
	input   strings.Builder
	stopped bool
}

// anthropicEvent is the union of the stream's data objects.
type anthropicEvent struct {
	Type    string `json:"type"`
	Index   *int   `json:"index"`
	Message *struct {
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	Usage        *anthropicUsage `json:"usage"` // message_delta: cumulative output
	ContentBlock *struct {
		Type string `json:"type"`
		Text string `json:"text"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicUsage is the usage object of message_start and message_delta.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// merge takes what u reports (message_delta's counts are cumulative).
func (u *anthropicUsage) merge(into **Usage) {
	if u == nil {
		return
	}
	if *into == nil {
		*into = &Usage{}
	}
	for _, f := range []struct {
		v   *int64
		dst *int64
	}{{u.InputTokens, &(*into).Input}, {u.OutputTokens, &(*into).Output},
		{u.CacheReadInputTokens, &(*into).CacheRead}, {u.CacheCreationInputTokens, &(*into).CacheWrite}} {
		if f.v != nil && *f.v >= 0 {
			*f.dst = *f.v
		}
	}
}

// anthropicErrorStatus maps a stream error type to its documented HTTP status
// (https://docs.anthropic.com/en/api/errors).
var anthropicErrorStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

// event handles one SSE data payload; done is true after message_stop.
func (d *anthropicDecoder) event(data string, emit func(Event) error) (done bool, err error) {
	var ev anthropicEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return false, fmt.Errorf("%s: %w: event data is not JSON: %w", d.name, ErrMalformed, err)
	}
	if d.blocks == nil {
		d.blocks = map[int]*anthropicBlockState{}
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			ev.Message.Usage.merge(&d.usage)
		}
		return false, nil
	case "ping":
		return false, nil
	case "content_block_start":
		if ev.Index == nil || ev.ContentBlock == nil {
			return false, fmt.Errorf("%s: %w: content_block_start without index or content_block", d.name, ErrMalformed)
		}
		if _, dup := d.blocks[*ev.Index]; dup {
			return false, fmt.Errorf("%s: %w: content block %d started twice", d.name, ErrMalformed, *ev.Index)
		}
		b := &anthropicBlockState{kind: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
		d.blocks[*ev.Index] = b
		d.order = append(d.order, b)
		if b.kind == "tool_use" && b.id == "" {
			return false, fmt.Errorf("%s: %w: tool_use block %d without id", d.name, ErrMalformed, *ev.Index)
		}
		if b.kind == "text" && ev.ContentBlock.Text != "" {
			return false, emit(Event{Kind: EventDelta, Text: ev.ContentBlock.Text})
		}
		return false, nil
	case "content_block_delta":
		if ev.Index == nil || ev.Delta == nil {
			return false, fmt.Errorf("%s: %w: content_block_delta without index or delta", d.name, ErrMalformed)
		}
		b, ok := d.blocks[*ev.Index]
		if !ok {
			return false, fmt.Errorf("%s: %w: delta for unknown content block %d", d.name, ErrMalformed, *ev.Index)
		}
		switch ev.Delta.Type {
		case "text_delta":
			if b.kind != "text" {
				return false, fmt.Errorf("%s: %w: text_delta in a %s block", d.name, ErrMalformed, b.kind)
			}
			if ev.Delta.Text == "" {
				return false, nil
			}
			return false, emit(Event{Kind: EventDelta, Text: ev.Delta.Text})
		case "input_json_delta":
			if b.kind != "tool_use" {
				return false, fmt.Errorf("%s: %w: input_json_delta in a %s block", d.name, ErrMalformed, b.kind)
			}
			if b.input.Len()+len(ev.Delta.PartialJSON) > maxToolInput {
				return false, fmt.Errorf("%s: %w: tool input over %d bytes", d.name, ErrMalformed, maxToolInput)
			}
			b.input.WriteString(ev.Delta.PartialJSON)
		}
		// thinking_delta, signature_delta, citations_delta, ...: not ours.
		return false, nil
	case "content_block_stop":
		if ev.Index == nil {
			return false, fmt.Errorf("%s: %w: content_block_stop without index", d.name, ErrMalformed)
		}
		b, ok := d.blocks[*ev.Index]
		if !ok {
			return false, fmt.Errorf("%s: %w: stop for unknown content block %d", d.name, ErrMalformed, *ev.Index)
		}
		if b.kind == "tool_use" && !b.stopped {
			args, why := parseArgs(b.input.String())
			d.calls = append(d.calls, Event{Kind: EventToolCall, CallID: b.id, Name: b.name, Args: args, ArgsError: why, Input: b.input.String()})
		}
		b.stopped = true
		return false, nil
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			d.stop = ev.Delta.StopReason
		}
		ev.Usage.merge(&d.usage)
		return false, nil
	case "message_stop":
		// A tool_use block the output limit cut off gets no
		// content_block_stop: it is reported as a call whose input is
		// incomplete, never dropped silently (issue 16 item 6).
		for _, b := range d.order {
			if b.kind == "tool_use" && !b.stopped {
				d.calls = append(d.calls, Event{Kind: EventToolCall, CallID: b.id, Name: b.name,
					ArgsError: "tool input cut off before it was complete", Input: b.input.String()})
			}
		}
		for _, c := range d.calls {
			if err := emit(c); err != nil {
				return false, err
			}
		}
		return true, emit(Event{Kind: EventDone, StopReason: d.stop, Usage: d.usage})
	case "error":
		se := &StatusError{Provider: d.name, Code: 500}
		if ev.Error != nil {
			se.Type, se.Message = bound(ev.Error.Type, 100), bound(ev.Error.Message, 512)
			if d.redact != nil {
				se.Type, se.Message = d.redact(se.Type), d.redact(se.Message)
			}
			if code, ok := anthropicErrorStatus[ev.Error.Type]; ok {
				se.Code = code
			}
		}
		return false, se
	case "":
		return false, fmt.Errorf("%s: %w: event without a type", d.name, ErrMalformed)
	}
	return false, nil // new event types are to be ignored, as the API reference asks
}
