package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
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
	Role string `json:"role"`
	// Content holds anthropicBlock values, and json.RawMessage blocks
	// replayed verbatim from an earlier response (Message.Content).
	Content []any `json:"content"`
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

// anthropicImage is an image content block of a user message.
type anthropicImage struct {
	Type   string               `json:"type"` // "image"
	Source anthropicImageSource `json:"source"`
}

type anthropicImageSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
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
		var blocks []any
		switch m.Role {
		case RoleUser:
			role = "user"
			if m.Text != "" {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Text})
			}
			for _, im := range m.Images {
				blocks = append(blocks, anthropicImage{Type: "image", Source: anthropicImageSource{
					Type: "base64", MediaType: im.MediaType, Data: base64.StdEncoding.EncodeToString(im.Data)}})
			}
		case RoleAssistant:
			role = "assistant"
			var raw []json.RawMessage
			if len(m.Content) > 0 && json.Unmarshal(m.Content, &raw) == nil && len(raw) > 0 {
				// The response's own blocks, verbatim: server tool uses must
				// be followed by their results, thinking keeps its signature.
				for _, b := range raw {
					blocks = append(blocks, b)
				}
			} else if m.Text != "" {
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
// the call carries it — verbatim when it is a JSON object,
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
	// contentSize is the bytes kept for replay (maxAnthropicContent).
	contentSize int
	usage       *Usage // as reported; nil when nothing was
}

type anthropicBlockState struct {
	kind    string // text, tool_use, server_tool_use, *_tool_result, thinking, ...
	id      string
	name    string
	input   strings.Builder // tool_use and server_tool_use: the input_json_delta pieces
	stopped bool
	// raw is the content_block object of content_block_start as sent; the
	// deltas below are folded into it when the block is replayed.
	raw       json.RawMessage
	text      strings.Builder // text_delta
	thinking  strings.Builder // thinking_delta
	signature strings.Builder // signature_delta
	citations []json.RawMessage
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
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		PartialJSON string          `json:"partial_json"`
		Thinking    string          `json:"thinking"`
		Signature   string          `json:"signature"`
		Citation    json.RawMessage `json:"citation"`
		StopReason  string          `json:"stop_reason"`
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
		var raw struct {
			ContentBlock json.RawMessage `json:"content_block"`
		}
		if json.Unmarshal([]byte(data), &raw) == nil {
			b.raw = raw.ContentBlock
		}
		d.blocks[*ev.Index] = b
		d.order = append(d.order, b)
		switch b.kind {
		case "tool_use":
			if b.id == "" {
				return false, fmt.Errorf("%s: %w: tool_use block %d without id", d.name, ErrMalformed, *ev.Index)
			}
		case "text":
			if ev.ContentBlock.Text != "" {
				b.text.WriteString(ev.ContentBlock.Text)
				return false, emit(Event{Kind: EventDelta, Text: ev.ContentBlock.Text})
			}
		case "server_tool_use":
			// The provider runs this tool itself (web_search, web_fetch,
			// code_execution, ...): it is not a ctx tool call. It is reported
			// on EventDone and replayed verbatim on the next turn.
		default:
			if !knownAnthropicBlock(b.kind) {
				slog.Debug("anthropic: unknown content block type kept for replay", "provider", d.name, "type", bound(b.kind, 64))
			}
		}
		if d.contentSize += len(b.raw); d.contentSize > maxAnthropicContent {
			return false, fmt.Errorf("%s: %w: content blocks over %d bytes", d.name, ErrMalformed, maxAnthropicContent)
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
			if err := d.grow(len(ev.Delta.Text)); err != nil {
				return false, err
			}
			b.text.WriteString(ev.Delta.Text)
			return false, emit(Event{Kind: EventDelta, Text: ev.Delta.Text})
		case "input_json_delta":
			// server_tool_use blocks stream their input the same way.
			if b.kind != "tool_use" && b.kind != "server_tool_use" {
				return false, fmt.Errorf("%s: %w: input_json_delta in a %s block", d.name, ErrMalformed, b.kind)
			}
			if b.input.Len()+len(ev.Delta.PartialJSON) > maxToolInput {
				return false, fmt.Errorf("%s: %w: tool input over %d bytes", d.name, ErrMalformed, maxToolInput)
			}
			if b.kind == "server_tool_use" {
				if err := d.grow(len(ev.Delta.PartialJSON)); err != nil {
					return false, err
				}
			}
			b.input.WriteString(ev.Delta.PartialJSON)
		case "thinking_delta":
			if err := d.grow(len(ev.Delta.Thinking)); err != nil {
				return false, err
			}
			b.thinking.WriteString(ev.Delta.Thinking)
		case "signature_delta":
			if err := d.grow(len(ev.Delta.Signature)); err != nil {
				return false, err
			}
			b.signature.WriteString(ev.Delta.Signature)
		case "citations_delta":
			if len(ev.Delta.Citation) > 0 {
				if err := d.grow(len(ev.Delta.Citation)); err != nil {
					return false, err
				}
				b.citations = append(b.citations, ev.Delta.Citation)
			}
		default:
			// New delta types are to be ignored, as the API reference asks.
			slog.Debug("anthropic: unknown delta type skipped", "provider", d.name, "type", bound(ev.Delta.Type, 64))
		}
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
		// incomplete, never dropped silently.
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
		done := Event{Kind: EventDone, StopReason: d.stop, Usage: d.usage}
		done.Content, done.ServerTools = d.replay()
		return true, emit(done)
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
	// New event types are to be ignored, as the API reference asks.
	slog.Debug("anthropic: unknown event type skipped", "provider", d.name, "type", bound(ev.Type, 64))
	return false, nil
}

// maxAnthropicContent bounds what one message's replayed blocks (server
// tool results, thinking, citations) may hold: results of a web search or
// fetch are large, but not unbounded.
const maxAnthropicContent = 8 << 20

// grow counts n more bytes of kept content against maxAnthropicContent.
func (d *anthropicDecoder) grow(n int) error {
	if d.contentSize += n; d.contentSize > maxAnthropicContent {
		return fmt.Errorf("%s: %w: content blocks over %d bytes", d.name, ErrMalformed, maxAnthropicContent)
	}
	return nil
}

// knownAnthropicBlock reports the documented content block types besides
// text and tool_use: server tool results, thinking, and the like. Others are
// kept all the same; the name only decides whether a debug line is logged.
func knownAnthropicBlock(kind string) bool {
	switch kind {
	case "thinking", "redacted_thinking", "web_search_tool_result", "web_fetch_tool_result",
		"code_execution_tool_result", "bash_code_execution_tool_result",
		"text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
		"container_upload", "tool_search_tool_result":
		return true
	}
	return false
}

// replay returns the message's content blocks as the API must receive them
// back in the assistant message of the next request — every block but the
// ctx tool_use calls, which the caller sends as its own messages — when the
// message holds a block text and tool_use cannot represent (a server tool
// use or result, thinking, a citation); otherwise nil. The server tools the
// provider ran are listed for the record.
func (d *anthropicDecoder) replay() (json.RawMessage, []ServerTool) {
	var tools []ServerTool
	special := false
	for _, b := range d.order {
		switch {
		case b.kind == "server_tool_use" || b.kind == "mcp_tool_use":
			tools = append(tools, ServerTool{ID: b.id, Name: b.name, Input: bound(b.input.String(), 1024)})
			special = true
		case b.kind == "text":
			special = special || len(b.citations) > 0
		case b.kind != "tool_use":
			special = true
		}
	}
	if !special {
		return nil, tools
	}
	blocks := make([]json.RawMessage, 0, len(d.order))
	for _, b := range d.order {
		if b.kind == "tool_use" {
			continue
		}
		blk, ok := b.block()
		if !ok {
			slog.Debug("anthropic: content block not replayable, left out", "provider", d.name, "type", bound(b.kind, 64))
			continue
		}
		blocks = append(blocks, blk)
	}
	out, err := json.Marshal(blocks)
	if err != nil {
		return nil, tools
	}
	return out, tools
}

// block is the content block as the API sent it, with its deltas folded in;
// ok is false when it cannot be rebuilt (its start object was not JSON, or a
// server tool's input never became a JSON object).
func (b *anthropicBlockState) block() (json.RawMessage, bool) {
	obj := map[string]json.RawMessage{}
	if json.Unmarshal(b.raw, &obj) != nil || obj == nil {
		return nil, false
	}
	set := func(k string, v any) {
		raw, _ := json.Marshal(v) // strings and raw JSON only
		obj[k] = raw
	}
	switch b.kind {
	case "text":
		set("text", b.text.String())
		if len(b.citations) > 0 {
			set("citations", b.citations)
		}
	case "thinking":
		if b.thinking.Len() > 0 {
			set("thinking", b.thinking.String())
		}
		if b.signature.Len() > 0 {
			set("signature", b.signature.String())
		}
	case "server_tool_use", "mcp_tool_use":
		if in := b.input.String(); in != "" {
			var v map[string]json.RawMessage
			if json.Unmarshal([]byte(in), &v) != nil || v == nil {
				return nil, false
			}
			obj["input"] = json.RawMessage(in)
		}
	}
	out, err := json.Marshal(obj)
	return out, err == nil
}
