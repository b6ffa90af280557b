package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawSSE serves data payloads as an Anthropic event stream.
func rawSSE(payloads ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		var ev []string
		for _, p := range payloads {
			var v struct{ Type string }
			_ = json.Unmarshal([]byte(p), &v)
			ev = append(ev, "event: "+v.Type+"\ndata: "+p)
		}
		sse(w, ev...)
	}
}

// TestModelServerToolsRecordedAndReplayed: an Anthropic reply with a server
// tool (the provider's own web_search, its result, a citation, thinking) no
// longer ends the run as a malformed stream: the server tool is recorded as
// a warning and never becomes a tool_call; ctx's own tsh call in the same
// reply runs; the next request replays the server tool blocks verbatim
// before the tool_use; a pause_turn reply is sent back for the model to
// continue, and the conclusion keeps the text said before the pause.
func TestModelServerToolsRecordedAndReplayed(t *testing.T) {
	const msgStart = `{"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":1}}}`
	first := rawSSE(msgStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"search"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG123"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_e2e1","name":"web_search","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"what time\"}"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_e2e1","content":[{"type":"web_search_result","title":"T","url":"https://example.com/t","encrypted_content":"ENC42"}]}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","cited_text":"t","url":"https://example.com/t","title":"T","encrypted_index":"EI"}}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"Checking the clock."}}`,
		`{"type":"content_block_stop","index":3}`,
		`{"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"toolu_e2e","name":"tsh","input":{}}}`,
		`{"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":"{\"args\":[\"call\",\"clock\"]}"}}`,
		`{"type":"content_block_stop","index":4}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}`,
		`{"type":"message_stop"}`)
	paused := rawSSE(msgStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is "}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_e2e2","name":"web_fetch","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"url\":\"https://example.com/t\"}"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"future_event","x":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"pause_turn"},"usage":{"output_tokens":5}}`,
		`{"type":"message_stop"}`)
	f := newFakeProvider(t, first, paused, anthropicText("noon."))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	c := w.dial("m")
	c.send(sendReq("q1", "what time is it?"))
	got := c.until("done", 30*time.Second)
	var warnings []string
	calls := 0
	var conclusion frame
	for _, fr := range got {
		switch fr.Type {
		case "warning":
			warnings = append(warnings, fr.Message)
		case "tool_call":
			calls++
			if fr.Name != "tsh" {
				t.Errorf("a server tool became a tool_call: %s", fr.raw)
			}
		case "assistant":
			conclusion = fr
		}
	}
	if calls != 1 {
		t.Fatalf("%d tool_call frames, want the one tsh call (frames %v)", calls, types(got))
	}
	all := strings.Join(warnings, "\n")
	if !strings.Contains(all, "web_search (srvtoolu_e2e1") || !strings.Contains(all, "web_fetch (srvtoolu_e2e2") {
		t.Fatalf("server tools not recorded as warnings: %q", warnings)
	}
	if last := got[len(got)-1]; last.Status != "ok" || conclusion.Text != "It is noon." {
		t.Fatalf("conclusion %s / %s", conclusion.raw, last.raw)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("provider saw %d requests, want 3", len(reqs))
	}
	body := func(i int) map[string]any {
		var v map[string]any
		if err := json.Unmarshal([]byte(reqs[i][strings.Index(reqs[i], "{"):]), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	msgs := body(1)["messages"].([]any)
	asst := msgs[len(msgs)-2].(map[string]any)
	var kinds []string
	for _, b := range asst["content"].([]any) {
		kinds = append(kinds, b.(map[string]any)["type"].(string))
	}
	if strings.Join(kinds, ",") != "thinking,server_tool_use,web_search_tool_result,text,tool_use" {
		t.Fatalf("second request's assistant content %v", kinds)
	}
	if !strings.Contains(reqs[1], `"signature":"SIG123"`) || !strings.Contains(reqs[1], `"encrypted_content":"ENC42"`) || !strings.Contains(reqs[1], `"encrypted_index":"EI"`) {
		t.Errorf("blocks not replayed verbatim: %s", reqs[1])
	}
	msgs = body(2)["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "assistant" || !strings.Contains(reqs[2], `"id":"srvtoolu_e2e2"`) {
		t.Fatalf("third request does not end with the paused reply: %v", last)
	}
}

// TestModelThoughtSignatureReplayed: a tool call that carries provider data
// (Gemini's thought signature in an OpenAI-compatible stream's
// extra_content) goes back with the call on the run's next turn, and the
// reasoning_content of the stream is neither fatal nor shown.
func TestModelThoughtSignatureReplayed(t *testing.T) {
	chunk := func(body string) string { return "data: " + body }
	first := func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			chunk(`{"choices":[{"delta":{"role":"assistant","reasoning_content":"think"},"index":0}],"object":"chat.completion.chunk"}`),
			chunk(`{"choices":[{"delta":{"role":"assistant","tool_calls":[{"extra_content":{"google":{"thought_signature":"SIGe2e"}},"function":{"arguments":"{\"args\":[\"call\",\"clock\"]}","name":"tsh"},"id":"function-call-1","type":"function","index":0}]},"index":0}],"object":"chat.completion.chunk"}`),
			chunk(`{"choices":[{"delta":{},"finish_reason":"tool_calls","index":0}],"object":"chat.completion.chunk"}`),
			chunk(`[DONE]`))
	}
	second := func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			chunk(`{"choices":[{"delta":{"content":"noon"},"index":0}],"object":"chat.completion.chunk"}`),
			chunk(`{"choices":[{"delta":{},"finish_reason":"stop","index":0}],"object":"chat.completion.chunk"}`),
			chunk(`[DONE]`))
	}
	f := newFakeProvider(t, first, second)
	w := modelWorld(t, f, "openai/gpt-4o")
	c := w.dial("m")
	c.send(sendReq("q1", "what time is it?"))
	got := c.until("done", 30*time.Second)
	if last := got[len(got)-1]; last.Status != "ok" {
		t.Fatalf("frames %v: %s", types(got), last.raw)
	}
	for _, fr := range got {
		if fr.Type == "delta" && strings.Contains(fr.Text, "think") {
			t.Errorf("reasoning shown as text: %s", fr.raw)
		}
	}
	reqs := f.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1], `"extra_content":{"google":{"thought_signature":"SIGe2e"}}`) {
		t.Fatalf("the signature did not go back with its call: %v", reqs)
	}
}
