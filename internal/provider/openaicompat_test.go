package provider

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// Current chat-completions stream shapes: reasoning_content / reasoning
// deltas (not shown, not fatal), refusal null, unknown top-level fields, a
// tool call split across chunks with id and name only in the first, the
// usage chunk with empty choices after the finish_reason.
func TestOpenAICurrentStreamShapes(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []Event
	}{
		{"openai_reasoning.sse", []Event{
			{Kind: EventDelta, Text: "Listing."},
			{Kind: EventToolCall, CallID: "call_r1", Name: "tsh", Args: []string{"list"}, Input: `{"args":["list"]}`},
			{Kind: EventDone, StopReason: "tool_calls", Usage: &Usage{Input: 50, Output: 30, CacheRead: 10}},
		}},
		{"gemini_thought_signature.sse", []Event{
			{Kind: EventToolCall, CallID: "function-call-9061207435881398862", Name: "tsh", Args: []string{"list"}, Input: `{"args":["list"]}`,
				Extra: json.RawMessage(`{"google":{"thought_signature":"CiQBcsjafQ3vK9x2Zm1ZWd0K"}}`)},
			{Kind: EventDone, StopReason: "tool_calls", Usage: &Usage{Input: 95, Output: 18}},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			d := &openaiDecoder{name: "openai"}
			got, done, err := decodeAll(d.event, sseData(t, tc.file))
			if err != nil || !done {
				t.Fatalf("done %v err %v", done, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("events\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// Gemini's thought signature goes back with its call: without it Gemini 3
// refuses the next request.
func TestGeminiThoughtSignatureSentBack(t *testing.T) {
	srv := newServer(t, replay(t, "gemini_thought_signature.sse"), replay(t, "openai_after_tool.sse"))
	p := newProvider(t, testConfig("gemini", KindOpenAI, srv.URL, testKey))
	ctx := ctxTimeout(t, 10*time.Second)
	req := userTurn("which tools?")
	var rec recorder
	if err := p.Stream(ctx, req, rec.emit); err != nil {
		t.Fatal(err)
	}
	var call Event
	for _, ev := range rec.all() {
		if ev.Kind == EventToolCall {
			call = ev
		}
	}
	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, ToolCallID: call.CallID, ToolName: call.Name, ToolArgs: call.Args, ToolExtra: call.Extra},
		Message{Role: RoleTool, ToolCallID: call.CallID, ToolName: call.Name, Text: "bash\n"})
	var rec2 recorder
	if err := p.Stream(ctx, req, rec2.emit); err != nil {
		t.Fatal(err)
	}
	asst := get(t, srv.body(t, 1), "messages", 2) // system, user, assistant
	if get(t, asst, "tool_calls", 0, "id") != call.CallID ||
		get(t, asst, "tool_calls", 0, "extra_content", "google", "thought_signature") != "CiQBcsjafQ3vK9x2Zm1ZWd0K" {
		t.Fatalf("assistant message %v", asst)
	}
}

// FuzzOpenAIDecoder: any chunk sequence, seeded with every recorded
// OpenAI-compatible stream, never panics; an Extra it returns is JSON.
func FuzzOpenAIDecoder(f *testing.F) {
	for _, pat := range []string{"openai_*.sse", "gemini_*.sse", "llamacpp_*.sse"} {
		files, _ := filepath.Glob(filepath.Join("testdata", pat))
		for _, name := range files {
			for _, d := range sseData(f, filepath.Base(name)) {
				f.Add(d, "[DONE]")
			}
		}
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		d := &openaiDecoder{name: "openai"}
		for _, p := range []string{a, b, "[DONE]"} {
			done, err := d.event(p, func(ev Event) error {
				if ev.Extra != nil && !json.Valid(ev.Extra) {
					t.Fatalf("extra not JSON: %q", ev.Extra)
				}
				return nil
			})
			if err != nil || done {
				return
			}
		}
	})
}
