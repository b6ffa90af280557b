package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// OpenAI streams from an OpenAI-compatible Chat Completions endpoint: POST
// {base_url}/chat/completions with stream:true
// (https://platform.openai.com/docs/api-reference/chat-streaming). The base URL
// includes the API version, as OPENAI_BASE_URL in the official SDKs
// (https://api.openai.com/v1, http://127.0.0.1:8080/v1 for llama.cpp's server,
// http://127.0.0.1:8000/v1 for vLLM, http://127.0.0.1:11434/v1 for Ollama).
// Without a key no Authorization header is sent.
type OpenAI struct {
	ep         endpoint
	maxTokens  int
	maxTokensF string
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI builds the provider of one resolved entry.
func NewOpenAI(pc ProviderConfig) *OpenAI {
	f := pc.MaxTokensField
	if f == "" {
		f = DefaultMaxTokensField(pc.BaseURL)
	}
	return &OpenAI{
		ep:         newEndpoint(pc, strings.TrimRight(pc.BaseURL, "/")+"/chat/completions"),
		maxTokens:  pc.MaxTokens,
		maxTokensF: f,
	}
}

// CloseIdleConnections releases idle keep-alive connections.
func (o *OpenAI) CloseIdleConnections() { o.ep.client.CloseIdleConnections() }

// Stream runs one turn.
func (o *OpenAI) Stream(ctx context.Context, req Request, emit func(Event) error) error {
	body, err := o.encode(req)
	if err != nil {
		return err
	}
	h := http.Header{}
	if !o.ep.key.IsZero() {
		h.Set("Authorization", "Bearer "+o.ep.key.Reveal())
	}
	s, err := o.ep.open(ctx, body, h)
	if err != nil {
		return err
	}
	defer s.Close()
	dec := &openaiDecoder{name: o.ep.name, redact: o.ep.redact}
	send := guard(ctx, emit)
	return s.pump("[DONE]", dec.event, send, func(err error) error {
		// Some compatible servers close right after the finish_reason
		// chunk; nothing of the message is missing then.
		if dec.finished && errors.Is(err, ErrIncomplete) && s.ctxError() == nil {
			return dec.finish(send)
		}
		return err
	})
}

// Wire types of the Chat Completions request.
type openaiRequest struct {
	Model    string          `json:"model"`
	Messages []openaiMessage `json:"messages"`
	Tools    []openaiTool    `json:"tools,omitempty"`
	Stream   bool            `json:"stream"`
	// One of these carries the configured output limit (W11).
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
	MaxTokens           int `json:"max_tokens,omitempty"`
	// StreamOptions asks for the usage chunk; sent where the field
	// follows OpenAI's current API (max_completion_tokens), since older
	// compatible servers may refuse unknown fields.
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
}

type openaiMessage struct {
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	// Parts, when set (a user message with images), is sent as the
	// content instead of Content: an array of content parts.
	Parts []openaiPart `json:"-"`
}

// openaiPart is one content part of a chat-completions message.
type openaiPart struct {
	Type     string          `json:"type"` // text | image_url
	Text     string          `json:"text,omitempty"`
	ImageURL *openaiImageURL `json:"image_url,omitempty"`
}

type openaiImageURL struct {
	URL string `json:"url"`
}

// MarshalJSON sends Parts as the content when there are any.
func (m openaiMessage) MarshalJSON() ([]byte, error) {
	type plain openaiMessage
	if len(m.Parts) == 0 {
		return json.Marshal(plain(m))
	}
	return json.Marshal(struct {
		plain
		Content []openaiPart `json:"content"`
	}{plain(m), m.Parts})
}

type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	// ExtraContent is sent back as the call carried it (Gemini's
	// OpenAI-compatible endpoint puts the thought signature there:
	// {"google":{"thought_signature":"…"}}; Gemini 3 refuses a function
	// call sent back without it).
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
}

type openaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// encode renders the request: the system text as the first message,
// consecutive assistant messages merged into one with all their tool_calls,
// every tool result as its own "tool" message. The API has no error flag on a
// tool result; a failed one is prefixed so the model can tell.
func (o *OpenAI) encode(req Request) ([]byte, error) {
	out := openaiRequest{Model: req.Model, Stream: true, Messages: []openaiMessage{}}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = o.maxTokens
	}
	if o.maxTokensF == "max_tokens" {
		out.MaxTokens = maxTokens
	} else {
		out.MaxCompletionTokens = maxTokens
		out.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{IncludeUsage: true}
	}
	for _, t := range req.Tools {
		var ot openaiTool
		ot.Type = "function"
		ot.Function.Name, ot.Function.Description = t.Name, t.Description
		ot.Function.Parameters = json.RawMessage(ToolInputSchema)
		out.Tools = append(out.Tools, ot)
	}
	if req.System != "" {
		out.Messages = append(out.Messages, openaiMessage{Role: "system", Content: req.System})
	}
	prevAssistant := false
	for i, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			um := openaiMessage{Role: "user", Content: m.Text}
			if len(m.Images) > 0 {
				// Content parts: the text, then each image as a data URL.
				if m.Text != "" {
					um.Parts = append(um.Parts, openaiPart{Type: "text", Text: m.Text})
				}
				for _, im := range m.Images {
					p := openaiPart{Type: "image_url", ImageURL: &openaiImageURL{URL: "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)}}
					um.Parts = append(um.Parts, p)
				}
			}
			out.Messages = append(out.Messages, um)
		case RoleAssistant:
			if !prevAssistant {
				out.Messages = append(out.Messages, openaiMessage{Role: "assistant"})
			}
			last := &out.Messages[len(out.Messages)-1]
			last.Content += m.Text
			if m.ToolCallID != "" {
				var tc openaiToolCall
				tc.ID, tc.Type = m.ToolCallID, "function"
				tc.Function.Name, tc.Function.Arguments = m.ToolName, string(encodeArgs(m.ToolArgs))
				if m.ToolInput != "" {
					tc.Function.Arguments = m.ToolInput // what the model really sent
				}
				if json.Valid(m.ToolExtra) {
					tc.ExtraContent = m.ToolExtra
				}
				last.ToolCalls = append(last.ToolCalls, tc)
			}
		case RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("%s: message %d: tool result without a call id", o.ep.name, i)
			}
			text := m.Text
			if m.IsError {
				text = "[error] " + text
			}
			out.Messages = append(out.Messages, openaiMessage{Role: "tool", ToolCallID: m.ToolCallID, Content: text})
		default:
			return nil, fmt.Errorf("%s: message %d: unknown role %q", o.ep.name, i, m.Role)
		}
		prevAssistant = m.Role == RoleAssistant
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", o.ep.name, err)
	}
	return body, nil
}

// maxRefusal bounds the refusal text kept from a stream.
const maxRefusal = 4 << 10

// openaiDecoder turns chat.completion.chunk objects into Events.
type openaiDecoder struct {
	name     string
	redact   func(string) string
	calls    []*openaiCallState
	byIndex  map[int]*openaiCallState
	stop     string
	refusal  strings.Builder // delta.refusal pieces
	finished bool            // a finish_reason arrived
	usage    *Usage          // the usage chunk, when the server sent one
}

type openaiCallState struct {
	id, name string
	args     strings.Builder
	extra    json.RawMessage // the call's extra_content, as sent
}

type openaiChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
				ExtraContent json.RawMessage `json:"extra_content"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

// event handles one SSE data payload; done is true after [DONE].
func (d *openaiDecoder) event(data string, emit func(Event) error) (done bool, err error) {
	if strings.TrimSpace(data) == "[DONE]" {
		return true, d.finish(emit)
	}
	var ch openaiChunk
	if err := json.Unmarshal([]byte(data), &ch); err != nil {
		return false, fmt.Errorf("%s: %w: chunk is not JSON: %w", d.name, ErrMalformed, err)
	}
	if u := ch.Usage; u != nil {
		// Usage as reported (OpenAI sends it in a last chunk with
		// stream_options.include_usage; cached tokens are part of prompt).
		d.usage = &Usage{Input: u.PromptTokens, Output: u.CompletionTokens}
		if u.PromptTokensDetails != nil {
			d.usage.CacheRead = u.PromptTokensDetails.CachedTokens
		}
	}
	if ch.Error != nil {
		se := &StatusError{Provider: d.name, Code: 500, Type: bound(ch.Error.Type, 100), Message: bound(ch.Error.Message, 512)}
		if n, err := strconv.Atoi(strings.Trim(string(ch.Error.Code), `"`)); err == nil && n >= 400 && n < 600 {
			se.Code = n
		} else if se.Type == "rate_limit_exceeded" || se.Type == "rate_limit_error" {
			se.Code = 429
		}
		if d.redact != nil {
			se.Type, se.Message = d.redact(se.Type), d.redact(se.Message)
		}
		return false, se
	}
	if d.byIndex == nil {
		d.byIndex = map[int]*openaiCallState{}
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // we never ask for n > 1
		}
		if c.Delta.Content != nil && *c.Delta.Content != "" {
			if err := emit(Event{Kind: EventDelta, Text: *c.Delta.Content}); err != nil {
				return false, err
			}
		}
		if c.Delta.Refusal != nil && d.refusal.Len() < maxRefusal {
			d.refusal.WriteString(*c.Delta.Refusal) // shown as the refusal
		}
		for _, tc := range c.Delta.ToolCalls {
			cs := d.callFor(tc.Index, tc.ID)
			if tc.ID != "" {
				cs.id = tc.ID
			}
			if cs.name == "" {
				cs.name = tc.Function.Name // sent once; some servers repeat it
			}
			if cs.args.Len()+len(tc.Function.Arguments) > maxToolInput {
				return false, fmt.Errorf("%s: %w: tool arguments over %d bytes", d.name, ErrMalformed, maxToolInput)
			}
			cs.args.WriteString(tc.Function.Arguments)
			if len(tc.ExtraContent) > 0 && string(tc.ExtraContent) != "null" && len(tc.ExtraContent) <= maxToolInput {
				cs.extra = append(json.RawMessage(nil), tc.ExtraContent...)
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			d.stop, d.finished = *c.FinishReason, true
		}
	}
	return false, nil
}

// callFor finds the call a tool_calls fragment belongs to: by index when the
// server sends one (OpenAI, vLLM, llama.cpp); otherwise a new id starts a new
// call and a fragment without id continues the last one.
//
// A new non-empty id at an occupied index starts a new call: Gemini's
// OpenAI-compatible endpoint and several proxies send parallel calls all at
// index 0, each with its own id.
func (d *openaiDecoder) callFor(index *int, id string) *openaiCallState {
	if index != nil {
		if cs, ok := d.byIndex[*index]; ok && (id == "" || cs.id == "" || cs.id == id) {
			return cs
		}
		cs := &openaiCallState{}
		d.byIndex[*index] = cs
		d.calls = append(d.calls, cs)
		return cs
	}
	if n := len(d.calls); n > 0 && (id == "" || d.calls[n-1].id == id) {
		return d.calls[n-1]
	}
	cs := &openaiCallState{}
	d.calls = append(d.calls, cs)
	return cs
}

// finish emits the accumulated tool calls and the end of the turn.
func (d *openaiDecoder) finish(emit func(Event) error) error {
	for i, cs := range d.calls {
		id := cs.id
		if id == "" {
			id = "call_" + strconv.Itoa(i) // some local servers send no ids
		}
		args, why := parseArgs(cs.args.String())
		if err := emit(Event{Kind: EventToolCall, CallID: id, Name: cs.name, Args: args, ArgsError: why, Input: cs.args.String(), Extra: cs.extra}); err != nil {
			return err
		}
	}
	refusal := d.refusal.String()
	if d.redact != nil {
		refusal = d.redact(refusal)
	}
	return emit(Event{Kind: EventDone, StopReason: d.stop, Refusal: bound(strings.ToValidUTF8(refusal, "\uFFFD"), maxRefusal), Usage: d.usage})
}
