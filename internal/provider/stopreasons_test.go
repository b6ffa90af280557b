package provider

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// streamFixture replays one transcript through a real provider of kind and
// returns its events.
func streamFixture(t *testing.T, kind, file string) ([]Event, error) {
	t.Helper()
	srv := newServer(t, replay(t, file))
	p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
	var rec recorder
	err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("go"), rec.emit)
	return rec.all(), err
}

func doneOf(t *testing.T, evs []Event) Event {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Kind != EventDone {
		t.Fatalf("no done event: %+v", evs)
	}
	return evs[len(evs)-1]
}

// TestStopReasonsReachTheCaller: a reply cut by the output limit inside a
// tool call reports the cut call (never drops it) and a truncated stop; a
// refusal and a content filter are reported as refused, with the refusal
// text when the provider sends one.
func TestStopReasonsReachTheCaller(t *testing.T) {
	t.Run("anthropic max_tokens inside tool_use", func(t *testing.T) {
		evs, err := streamFixture(t, KindAnthropic, "anthropic_max_tokens_tool.sse")
		if err != nil {
			t.Fatal(err)
		}
		done := doneOf(t, evs)
		if !done.Truncated() || done.Refused() || done.StopReason != "max_tokens" {
			t.Fatalf("done %+v", done)
		}
		var calls []Event
		for _, ev := range evs {
			if ev.Kind == EventToolCall {
				calls = append(calls, ev)
			}
		}
		if len(calls) != 1 || calls[0].CallID != "toolu_01MaxTokCut" || calls[0].ArgsError == "" || calls[0].Args != nil ||
			calls[0].Input != `{"args": ["call", "write", "notes.t` {
			t.Fatalf("the cut call is not reported as cut: %+v", calls)
		}
	})
	t.Run("openai length inside a tool call", func(t *testing.T) {
		evs, err := streamFixture(t, KindOpenAI, "openai_length_tool.sse")
		if err != nil {
			t.Fatal(err)
		}
		done := doneOf(t, evs)
		if !done.Truncated() || done.StopReason != "length" {
			t.Fatalf("done %+v", done)
		}
		if evs[0].Kind != EventToolCall || evs[0].ArgsError == "" || evs[0].Input != `{"args":["call","wri` {
			t.Fatalf("call %+v", evs[0])
		}
	})
	t.Run("anthropic refusal", func(t *testing.T) {
		evs, err := streamFixture(t, KindAnthropic, "anthropic_refusal.sse")
		if err != nil {
			t.Fatal(err)
		}
		if done := doneOf(t, evs); !done.Refused() || done.Truncated() || done.StopReason != "refusal" {
			t.Fatalf("done %+v", done)
		}
	})
	t.Run("openai delta.refusal", func(t *testing.T) {
		evs, err := streamFixture(t, KindOpenAI, "openai_refusal.sse")
		if err != nil {
			t.Fatal(err)
		}
		done := doneOf(t, evs)
		if !done.Refused() || done.Refusal != "I'm sorry, I can't help with that." {
			t.Fatalf("done %+v", done)
		}
		for _, ev := range evs {
			if ev.Kind == EventDelta {
				t.Fatalf("refusal text streamed as assistant text: %+v", ev)
			}
		}
	})
	t.Run("openai content_filter", func(t *testing.T) {
		evs, err := streamFixture(t, KindOpenAI, "openai_content_filter.sse")
		if err != nil {
			t.Fatal(err)
		}
		if done := doneOf(t, evs); !done.Refused() || done.StopReason != "content_filter" {
			t.Fatalf("done %+v", done)
		}
	})
	t.Run("complete turns are neither", func(t *testing.T) {
		for _, kind := range kinds {
			evs, err := streamFixture(t, kind, fixture(kind, "tool_use"))
			if err != nil {
				t.Fatal(err)
			}
			if done := doneOf(t, evs); done.Truncated() || done.Refused() {
				t.Fatalf("%s: %+v", kind, done)
			}
		}
	})
}

// TestLlamaCppErrorField: llama.cpp's server reports a failure inside a
// stream as an "error:" SSE field. The server's code and message reach the
// caller, and a 4xx is not retried.
func TestLlamaCppErrorField(t *testing.T) {
	srv := newServer(t, replay(t, "llamacpp_error.sse"))
	pc := testConfig("local", KindOpenAI, srv.URL, "")
	h := newHarness(t, pc)
	var rec recorder
	_, err := h.d.Dispatch(ctxTimeout(t, 10*time.Second), []string{"local/qwen"}, Fixed(userTurn("hi"), nil), rec.emit, h.onCandidate)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || se.Type != "exceed_context_size_error" ||
		!strings.Contains(err.Error(), "the request exceeds the available context size") {
		t.Fatalf("err %v, want the server's 400 and message", err)
	}
	if errors.Is(err, ErrIncomplete) || errors.Is(err, ErrModelUnavailable) {
		t.Fatalf("err %v is reported as a cut stream / unavailable model", err)
	}
	if n := srv.requests(); n != 1 {
		t.Fatalf("a 4xx was retried: %d requests", n)
	}
	for _, ev := range rec.all() {
		if ev.Kind == EventDone {
			t.Fatal("a failed stream reported done")
		}
	}
	// A 5xx in the field is a server error: retried like any other.
	srv5 := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("error: {\"code\":503,\"message\":\"Loading model\",\"type\":\"unavailable_error\"}\n\ndata: [DONE]\n\n"))
	})
	h5 := newHarness(t, testConfig("local", KindOpenAI, srv5.URL, ""))
	if _, err := h5.d.Dispatch(ctxTimeout(t, 10*time.Second), []string{"local/qwen"}, Fixed(userTurn("hi"), nil), (&recorder{}).emit, h5.onCandidate); !errors.Is(err, ErrModelUnavailable) || !strings.Contains(err.Error(), "Loading model") {
		t.Fatalf("err %v", err)
	}
	if n := srv5.requests(); n != 3 {
		t.Fatalf("a 503 was tried %d times, want 3", n)
	}
}

// TestParallelCallsSharingIndexZero: Gemini's OpenAI-compatible endpoint
// sends parallel calls one per chunk, all at index 0 with distinct ids; they
// are separate calls, never one call with concatenated arguments. A fragment
// without id still continues the call at its index.
func TestParallelCallsSharingIndexZero(t *testing.T) {
	evs, err := streamFixture(t, KindOpenAI, "gemini_parallel_tools.sse")
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Kind: EventToolCall, CallID: "function-call-11790427346212498210", Name: "tsh", Args: []string{"which", "grep"}, Input: `{"args":["which","grep"]}`},
		{Kind: EventToolCall, CallID: "function-call-11790427346212498211", Name: "tsh", Args: []string{"which", "sed"}, Input: `{"args":["which","sed"]}`},
		{Kind: EventDone, StopReason: "tool_calls"},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Fatalf("events\n%+v\nwant\n%+v", evs, want)
	}
	d := &openaiDecoder{name: "openai"}
	chunk := func(tc string) string {
		return `{"choices":[{"index":0,"delta":{"tool_calls":[` + tc + `]},"finish_reason":null}]}`
	}
	got, _, err := decodeAll(d.event, []string{
		chunk(`{"index":0,"id":"a","function":{"name":"tsh","arguments":"{\"args\":"}},{"index":0,"id":"b","function":{"name":"tsh","arguments":"{\"args\":[\"y\"]}"}}`),
		chunk(`{"index":0,"function":{"arguments":"x"}}`), // continues b, the call now at index 0
		"[DONE]",
	})
	if err != nil || len(got) != 3 || got[0].CallID != "a" || got[0].Input != `{"args":` || got[1].CallID != "b" || got[1].Input != `{"args":["y"]}x` {
		t.Fatalf("events %+v err %v", got, err)
	}
}

// TestInvalidToolInputSentBackVerbatim: the input the model really sent is
// kept on the event and sent back in the follow-up request — an object as
// is (Anthropic), any text as the arguments string (OpenAI) — never
// rewritten as {"args":[]}.
func TestInvalidToolInputSentBackVerbatim(t *testing.T) {
	for _, tc := range []struct {
		kind, input, want string
	}{
		{KindAnthropic, `{"command":"ls -la"}`, `{"command":"ls -la"}`},
		{KindAnthropic, `{"args":"ls"`, `{"input_text":"{\"args\":\"ls\""}`},
		{KindOpenAI, `{"args":"ls -la"}`, `{"args":"ls -la"}`},
		{KindOpenAI, `ls -la`, `ls -la`},
	} {
		srv := newServer(t, replay(t, fixture(tc.kind, "after_tool")))
		p := newProvider(t, testConfig(tc.kind, tc.kind, srv.URL, testKey))
		req := userTurn("go")
		req.Messages = append(req.Messages,
			Message{Role: RoleAssistant, ToolCallID: "c1", ToolName: "tsh", ToolInput: tc.input},
			Message{Role: RoleTool, ToolCallID: "c1", ToolName: "tsh", Text: "invalid tool input", IsError: true})
		if err := p.Stream(ctxTimeout(t, 10*time.Second), req, (&recorder{}).emit); err != nil {
			t.Fatal(err)
		}
		b := srv.body(t, 0)
		var got string
		switch tc.kind {
		case KindAnthropic:
			raw, _ := json.Marshal(get(t, b, "messages", 1, "content", 0, "input"))
			got = string(raw)
		case KindOpenAI:
			got, _ = get(t, b, "messages", 2, "tool_calls", 0, "function", "arguments").(string)
		}
		if got != tc.want {
			t.Errorf("%s %q: sent back %s, want %s", tc.kind, tc.input, got, tc.want)
		}
	}
	// The decoders keep the raw input of an invalid call.
	evs, _, _ := decodeAll((&openaiDecoder{name: "o"}).event, []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"tsh","arguments":"{\"args\":\"ls -la\"}"}}]},"finish_reason":"tool_calls"}]}`, "[DONE]"})
	if len(evs) != 2 || evs[0].ArgsError == "" || evs[0].Input != `{"args":"ls -la"}` {
		t.Fatalf("events %+v", evs)
	}
}

// TestMaxTokensFieldDefault: an openai-type provider sends its output limit
// in the field its server reads — max_tokens by default (Ollama's /v1,
// llama.cpp), max_completion_tokens for api.openai.com — and providers.json
// can choose. Checked on the request body.
func TestMaxTokensFieldDefault(t *testing.T) {
	root := t.TempDir()
	file := `{"providers":{
	  "ollama": {"type":"openai","base_url":"http://127.0.0.1:11434/v1","max_tokens":1024},
	  "llama":  {"type":"openai","base_url":"http://localhost:8080/v1","max_tokens":1024},
	  "openai": {"max_tokens":1024},
	  "forced": {"type":"openai","base_url":"http://127.0.0.1:8000/v1","max_tokens":1024,"max_tokens_field":"max_completion_tokens"}}}`
	if err := os.WriteFile(filepath.Join(root, FileName), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(root, os.Getuid(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"ollama": "max_tokens", "llama": "max_tokens", "openai": "max_completion_tokens", "forced": "max_completion_tokens"} {
		pc := cfg.Providers[name]
		if pc.MaxTokensField != want {
			t.Errorf("%s: field %q, want %q", name, pc.MaxTokensField, want)
		}
		srv := newServer(t, replay(t, fixture(KindOpenAI, "text")))
		pc.BaseURL = srv.URL + "/v1" // the resolved choice, served locally
		p := newProvider(t, pc)
		if err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), (&recorder{}).emit); err != nil {
			t.Fatal(err)
		}
		b := srv.body(t, 0)
		other := map[string]string{"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}[want]
		if _, sent := b[other]; b[want] != float64(1024) || sent {
			t.Errorf("%s: body sends %v=%v %v=%v", name, want, b[want], other, b[other])
		}
		// The usage chunk is asked for where the request
		// follows OpenAI's current API, never from servers that may refuse it.
		so, asked := b["stream_options"].(map[string]any)
		if asked != (want == "max_completion_tokens") || (asked && so["include_usage"] != true) {
			t.Errorf("%s: stream_options %v", name, b["stream_options"])
		}
	}
	if DefaultMaxTokensField("https://API.OpenAI.com/v1") != "max_completion_tokens" || DefaultMaxTokensField("http://127.0.0.1:11434/v1") != "max_tokens" {
		t.Error("DefaultMaxTokensField")
	}
}
