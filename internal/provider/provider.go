package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Provider streams one model turn. Stream calls emit serially, on the calling
// goroutine, with the turn's deltas, then its tool calls, then exactly one
// EventDone, and returns nil; on any failure it returns an error and emits no
// EventDone. Once ctx is done it emits nothing more and returns an error that
// wraps ctx.Err() (spec: X12). An error returned by emit ends the stream and is
// returned wrapped.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Event) error) error
}

// Role is who wrote a Message.
type Role string

// The three roles of a conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant" // text, and optionally one tool call
	RoleTool      Role = "tool"      // the result of one tool call
)

// Message is one entry of the conversation sent to a model. An assistant turn
// that made several tool calls is several consecutive assistant messages (the
// first may carry the turn's text); their results follow as consecutive tool
// messages. Encoders merge consecutive messages as each provider requires.
type Message struct {
	Role       Role
	Text       string   // user input, assistant text, or tool result content
	ToolCallID string   // assistant: the call made; tool: the call answered
	ToolName   string   // the tool called (assistant and tool messages)
	ToolArgs   []string // assistant: the call's argv
	// ToolInput, when set, is the call's input exactly as the model sent it
	// (JSON text, possibly invalid); encoders send it back instead of an
	// input built from ToolArgs, so the model sees what it really wrote.
	ToolInput string
	IsError   bool // tool: the result status was not "ok"
	// ToolExtra, on an assistant message with a call, is that call's
	// Event.Extra, sent back with it.
	ToolExtra json.RawMessage
	// Content, on an assistant message, is Event.Content of the turn it
	// records: the provider's own content blocks, sent instead of Text
	// (the tool calls still come from ToolCallID and the messages after).
	Content json.RawMessage
	// Images, on a user message, are the images it attaches, after its
	// text: the bytes as read (and checked) from the session's blob store.
	Images []Image
}

// Image is one image of a user message: its sniffed media type (image/png,
// image/jpeg, image/gif or image/webp) and its bytes, which the encoders
// send base64-encoded.
type Image struct {
	MediaType string
	Data      []byte
}

// Tool is a direct-native tool offered to the model; every tool takes an argv
// array (ToolInputSchema).
type Tool struct {
	Name        string
	Description string
}

// ToolInputSchema is the JSON schema of every native tool's input (interfaces.md "Model agents").
const ToolInputSchema = `{"type":"object","properties":{"args":{"type":"array","items":{"type":"string"}}},"required":["args"]}`

// TSH is the one native tool offered by default. spec: K1
func TSH() Tool {
	return Tool{
		Name: "tsh",
		Description: "Run the CortexFS tool shell. args is tsh's argv: " +
			`["list"], ["load","NAME"], ["pin","NAME"], ["context"], ["which","NAME"], ["call","NAME","ARG",...]. ` +
			"The result is the command's output.",
	}
}

// Request is one model turn.
type Request struct {
	Model     string // the model name without the "provider/" prefix; Dispatch sets it
	System    string
	Messages  []Message
	MaxTokens int    // output limit; 0 means the provider's configured max_tokens (W11)
	Tools     []Tool // usually []Tool{TSH()}; nil offers no tools
}

// EventKind says what an Event carries.
type EventKind uint8

// Event kinds, in the order a turn emits them.
const (
	EventDelta    EventKind = iota + 1 // Text: a piece of assistant text
	EventToolCall                      // CallID, Name, Args (or ArgsError)
	EventDone                          // StopReason; the turn is complete
)

func (k EventKind) String() string {
	switch k {
	case EventDelta:
		return "delta"
	case EventToolCall:
		return "tool_call"
	case EventDone:
		return "done"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one step of a streamed turn. Tool calls are emitted only once the
// provider's message is complete, so a caller may act on them at once.
type Event struct {
	Kind      EventKind
	Text      string
	CallID    string
	Name      string
	Args      []string
	ArgsError string // the model's input was not {"args":[strings...]}; Args is nil
	// Input is the tool input exactly as the model sent it (JSON text; for
	// a call cut off by the output limit, the part that arrived).
	Input string
	// Extra, on EventToolCall, is provider data the call carried that must
	// go back with it (OpenAI-compatible extra_content: Gemini's thought
	// signature); nil when none.
	Extra      json.RawMessage
	StopReason string // the provider's own value: end_turn, tool_use, max_tokens, stop, tool_calls, length, refusal, content_filter, ...
	// Refusal is the refusal text the provider sent (OpenAI delta.refusal),
	// on EventDone.
	Refusal string
	// Usage is the turn's token use as the provider reported it, on
	// EventDone; nil when it reported none (nothing is made up).
	Usage *Usage
	// Content, on EventDone, is the assistant message's content blocks in
	// the provider's own wire form, for the caller to send back verbatim
	// (Message.Content) when the message holds blocks that text and tool
	// calls cannot represent: an Anthropic server tool use and its result,
	// thinking, citations. The API rejects or loses them otherwise. Nil for
	// a message of text and tool calls only.
	Content json.RawMessage
	// ServerTools, on EventDone, are the tools the provider ran itself
	// during the turn (Anthropic server tools such as web_search): not ctx
	// tool calls, and never run by ctx.
	ServerTools []ServerTool
}

// ServerTool is one tool the provider ran on its side.
type ServerTool struct {
	ID    string
	Name  string
	Input string // its input JSON, bounded
}

// Usage is token use as a provider reports it.
type Usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read,omitempty"`
	CacheWrite int64 `json:"cache_write,omitempty"`
}

// Add adds u to t (a nil u adds nothing).
func (t *Usage) Add(u *Usage) {
	if u == nil {
		return
	}
	t.Input += u.Input
	t.Output += u.Output
	t.CacheRead += u.CacheRead
	t.CacheWrite += u.CacheWrite
}

// Truncated reports whether the turn stopped at the output limit
// (Anthropic max_tokens / model_context_window_exceeded, OpenAI length): its
// text is incomplete and any tool call in it may be cut.
func (e Event) Truncated() bool {
	switch e.StopReason {
	case "max_tokens", "length", "model_context_window_exceeded":
		return true
	}
	return false
}

// Refused reports whether the model or the provider declined the turn
// (Anthropic refusal, OpenAI delta.refusal or content_filter).
func (e Event) Refused() bool {
	return e.Refusal != "" || e.StopReason == "refusal" || e.StopReason == "content_filter"
}

// Error classes. Every error this package returns wraps at most one of them
// (or a *StatusError, or the context's error).
var (
	// ErrModelUnavailable: every candidate was unusable or failed (W6).
	ErrModelUnavailable = errors.New("model unavailable")
	// ErrConnection: the endpoint could not be reached or stopped answering.
	ErrConnection = errors.New("connection failed")
	// ErrIncomplete: the stream ended before the provider's end-of-message marker.
	ErrIncomplete = errors.New("stream ended before the message was complete")
	// ErrMalformed: the endpoint answered something that is not the documented stream.
	ErrMalformed = errors.New("malformed stream")
	// ErrCredentials: a credential source was refused (e.g. a secrets file not 0600).
	ErrCredentials = errors.New("credentials refused")
	// ErrNoKey: a hosted API's provider has no key at all.
	ErrNoKey = errors.New("no key")
	// ErrConfig: providers.json or a candidate name is invalid.
	ErrConfig = errors.New("invalid provider configuration")
)

// StatusError is an HTTP error status, or an error event inside a stream
// mapped to its documented status. Its text never contains a credential.
type StatusError struct {
	Provider   string
	Code       int
	Type       string // the provider's error type, e.g. rate_limit_error
	Message    string // the provider's message, bounded, credentials redacted
	RequestID  string
	RetryAfter time.Duration // from retry-after / retry-after-ms; 0 when absent
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.Provider, e.Code)
	if e.Type != "" {
		fmt.Fprintf(&b, " %s", e.Type)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// Retryable reports whether the status is worth retrying: 429 and 5xx (W6).
func (e *StatusError) Retryable() bool { return e.Code == 429 || e.Code >= 500 }

// toolInput is the input every native tool takes.
type toolInput struct {
	Args []string `json:"args"`
}

// parseArgs decodes a tool input; on failure it returns a reason for the model.
func parseArgs(raw string) ([]string, string) {
	if strings.TrimSpace(raw) == "" {
		return nil, `tool input is empty; expected {"args":["..."]}`
	}
	var in struct {
		Args *[]string `json:"args"`
	}
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return nil, `tool input is not {"args":[strings...]}: ` + bound(err.Error(), 200)
	}
	if in.Args == nil {
		return nil, `tool input has no "args" array`
	}
	if *in.Args == nil {
		return []string{}, ""
	}
	return *in.Args, ""
}

// encodeArgs renders an argv as a tool input object.
func encodeArgs(args []string) json.RawMessage {
	if args == nil {
		args = []string{}
	}
	b, _ := json.Marshal(toolInput{Args: args}) // cannot fail: strings only
	return b
}

// bound cuts s to at most n bytes on a rune boundary.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
