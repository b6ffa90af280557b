package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// recorded serves a provider transcript of internal/provider/testdata (the
// wire bytes after its "# " header), as the provider tests replay them.
func recorded(t *testing.T, name string) func(http.ResponseWriter, *http.Request) {
	data, err := os.ReadFile(filepath.Join("..", "internal", "provider", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(data, []byte("# ")) {
		_, data, _ = bytes.Cut(data, []byte("\n"))
	}
	body := bytes.TrimPrefix(data, []byte("\n"))
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}
}

// requestBody decodes the JSON body of a fakeProvider request record.
func requestBody(t *testing.T, rec string) map[string]any {
	t.Helper()
	parts := strings.SplitN(rec, "\n", 3)
	var m map[string]any
	if len(parts) != 3 || json.Unmarshal([]byte(parts[2]), &m) != nil {
		t.Fatalf("request record %q", rec)
	}
	return m
}

// compactJSON is v as encoding/json writes it without HTML escaping.
func compactJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func frameOf(fs []frame, typ string) (frame, bool) {
	for _, f := range fs {
		if f.Type == typ {
			return f, true
		}
	}
	return frame{}, false
}

func hasWarning(fs []frame, sub string) bool {
	for _, f := range fs {
		if f.Type == "warning" && strings.Contains(f.Message, sub) {
			return true
		}
	}
	return false
}

// TestModelFallbackCandidateOwnBudgetW6: the first candidate (200,000
// tokens) fails; the fallback has a 1,000-token window (3,000-char input
// budget). Its request is rendered for its own budget — the history that
// no longer fits is left out and said — never the first candidate's prompt.
// spec: W6 W8
func TestModelFallbackCandidateOwnBudgetW6(t *testing.T) {
	long := strings.Repeat("history ", 400) // ~3,200 chars a turn
	fail := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"type":"error","error":{"type":"api_error","message":"boom"}}`, 500)
	}
	f := newFakeProvider(t, anthropicText(long), anthropicText(long), anthropicText(long), fail,
		recorded(t, "openai_text.sse"))
	w := newWorld(t)
	os.MkdirAll(w.root, 0o755)
	os.WriteFile(filepath.Join(w.root, "models.tsv"), []byte("openai/tiny\t1000\n"), 0o644)
	os.WriteFile(filepath.Join(w.root, "providers.json"), []byte(`{"providers":{"anthropic":{"attempts":1}}}`), 0o600)
	w.start("ANTHROPIC_BASE_URL="+f.url, "ANTHROPIC_API_KEY="+testKey, "OPENAI_BASE_URL="+f.url+"/v1", "OPENAI_API_KEY="+testKey)
	w.mustCtx("agent", "create", "m", "--model", "anthropic/claude-sonnet-4-5,openai/tiny")
	c := w.dial("m")
	for i := 0; i < 3; i++ {
		c.send(sendReq("h"+itoa(i), "turn "+itoa(i)))
		if got := c.until("done", 20*time.Second); got[len(got)-1].Status != "ok" {
			t.Fatalf("run %d: %v", i, types(got))
		}
	}
	c.send(sendReq("fb", "and now?"))
	got := c.until("done", 30*time.Second)
	if got[len(got)-1].Status != "ok" {
		t.Fatalf("fallback run: %v", types(got))
	}
	if cand, ok := frameOf(got, "candidate"); !ok || cand.Status != "failed" {
		t.Errorf("no failed candidate frame: %v", types(got))
	}
	reqs := f.requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests", len(reqs))
	}
	body := requestBody(t, reqs[4])
	if body["model"] != "tiny" {
		t.Fatalf("request 5 went to %v", body["model"])
	}
	if n := len(compactJSON(body["messages"])); n > 3000 {
		t.Errorf("the fallback's message array is %d bytes, over its 3,000-char budget", n)
	}
	if !hasWarning(got, "older history messages were left out") {
		t.Errorf("what was left out for the fallback is not said: %v", types(got))
	}
	// The first candidate, with its own budget, got the whole history.
	if n := len(compactJSON(requestBody(t, reqs[3])["messages"])); n < 9000 {
		t.Errorf("the first candidate's request is only %d bytes", n)
	}
}

// TestModelEveryTurnFitsBudgetW8: a 16,000-byte tool result against a
// 3,000-char budget: the next turn's request is cut to fit, visibly, and a
// warning says so — never sent over. spec: W8 W9
func TestModelEveryTurnFitsBudgetW8(t *testing.T) {
	f := newFakeProvider(t, anthropicToolUse("toolu_big", "call", "big"), anthropicText("seen"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	w.tool("big", "#!/bin/sh\ni=0\nwhile [ $i -lt 160 ]; do printf '%0100d' 0; i=$((i+1)); done\n")
	w.mustCtx("agent", "set", "m", "window", "1000")
	c := w.dial("m")
	c.send(sendReq("b1", "read the big file"))
	got := c.until("done", 30*time.Second)
	if got[len(got)-1].Status != "ok" {
		t.Fatalf("frames %v", types(got))
	}
	if r, ok := frameOf(got, "tool_result"); !ok || len(r.Content) != 16000 {
		t.Fatalf("the durable tool result must stay whole: %d bytes", len(r.Content))
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	body := requestBody(t, reqs[1])
	res, _ := json.Marshal(body["messages"])
	if len(res) > 3000 || !strings.Contains(string(res), "tool result cut by ctx to fit the context window") {
		t.Errorf("second request: %d bytes of messages, cut marker %v", len(res), strings.Contains(string(res), "cut by ctx"))
	}
	if !hasWarning(got, "tool results: the latest cut") {
		t.Errorf("no warning for the cut: %v", types(got))
	}
}

// TestModelToolLoadVisibleNextTurn: a `tsh load` during a model run is in
// the tool context of that run's next turn. spec: K5
func TestModelToolLoadVisibleNextTurn(t *testing.T) {
	f := newFakeProvider(t, anthropicToolUse("toolu_load", "load", "clock"), anthropicText("loaded"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	c := w.dial("m")
	c.send(sendReq("l1", "load the clock"))
	got := c.until("done", 30*time.Second)
	if got[len(got)-1].Status != "ok" {
		t.Fatalf("frames %v", types(got))
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	s0, _ := requestBody(t, reqs[0])["system"].(string)
	s1, _ := requestBody(t, reqs[1])["system"].(string)
	if strings.Contains(s0, "- clock") || !strings.Contains(s1, "- clock") {
		t.Errorf("tool context per turn: first has clock %v, second has clock %v", strings.Contains(s0, "- clock"), strings.Contains(s1, "- clock"))
	}
}

// TestModelStopReasonsVisible: how a reply ended reaches the person — a
// reply cut inside a tool call is an error `truncated` and no call runs; cut
// text is a warning plus the partial answer; a refusal is an error
// `refused` with the refusal text.
func TestModelStopReasonsVisible(t *testing.T) {
	cutText := func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			anthropicEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_c", "type": "message", "role": "assistant", "content": []any{}}}),
			anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
			anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "The answer is"}}),
			anthropicEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
			anthropicEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "max_tokens"}}),
			anthropicEvent("message_stop", map[string]any{"type": "message_stop"}))
	}
	cases := []struct {
		name, model string
		answer      func(http.ResponseWriter, *http.Request)
		status      string // done status
		code, text  string // error code and message part, or the assistant text
		warning     string
	}{
		{"anthropic max_tokens in a call", "anthropic/claude-sonnet-4-5", recorded(t, "anthropic_max_tokens_tool.sse"), "error", "truncated", "max_tokens", ""},
		{"openai length in a call", "openai/gpt-4o", recorded(t, "openai_length_tool.sse"), "error", "truncated", "length", ""},
		{"anthropic max_tokens in text", "anthropic/claude-sonnet-4-5", cutText, "ok", "", "The answer is", "cut at the model's output limit"},
		{"anthropic refusal", "anthropic/claude-sonnet-4-5", recorded(t, "anthropic_refusal.sse"), "error", "refused", "declined", ""},
		{"openai refusal", "openai/gpt-4o", recorded(t, "openai_refusal.sse"), "error", "refused", "I'm sorry, I can't help with that.", ""},
		{"openai content filter", "openai/gpt-4o", recorded(t, "openai_content_filter.sse"), "error", "refused", "content filter", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProvider(t, tc.answer, anthropicText("a second turn must not happen"))
			w := modelWorld(t, f, tc.model)
			c := w.dial("m")
			c.send(sendReq("s1", "go"))
			got := c.until("done", 30*time.Second)
			if st := got[len(got)-1].Status; st != tc.status {
				t.Fatalf("done %s, want %s: %v", st, tc.status, types(got))
			}
			if _, ok := frameOf(got, "tool_call"); ok {
				t.Errorf("a call of a cut or refused reply was run: %v", types(got))
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d provider requests; the run must end with this reply", n)
			}
			if tc.code != "" {
				e, ok := frameOf(got, "error")
				if !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.text) {
					t.Errorf("error frame %s, want %s with %q", e.raw, tc.code, tc.text)
				}
			} else if a, ok := frameOf(got, "assistant"); !ok || a.Text != tc.text {
				t.Errorf("assistant %s", a.raw)
			}
			if tc.warning != "" && !hasWarning(got, tc.warning) {
				t.Errorf("no warning %q: %v", tc.warning, types(got))
			}
		})
	}
}

// TestModelLlamaCppStreamError: llama.cpp's "error:" SSE field ends the run
// with the server's message and code, without a retry.
func TestModelLlamaCppStreamError(t *testing.T) {
	f := newFakeProvider(t, recorded(t, "llamacpp_error.sse"), recorded(t, "llamacpp_error.sse"), recorded(t, "llamacpp_error.sse"))
	w := modelWorld(t, f, "openai/qwen")
	c := w.dial("m")
	c.send(sendReq("e1", "go"))
	got := c.until("done", 30*time.Second)
	e, ok := frameOf(got, "error")
	if !ok || e.Code != "provider_error" || !strings.Contains(e.Message, "400") ||
		!strings.Contains(e.Message, "the request exceeds the available context size") {
		t.Fatalf("error frame %s (%v)", e.raw, types(got))
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("a 4xx stream error was retried: %d requests", n)
	}
}

// TestModelInvalidToolInputRecordedAsSent: a tool input that is not an argv
// is recorded in the tool_call frame and sent back to the model as the
// model sent it, while the call fails as invalid.
func TestModelInvalidToolInputRecordedAsSent(t *testing.T) {
	bad := func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			anthropicEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_b", "type": "message", "role": "assistant", "content": []any{}}}),
			anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_bad", "name": "tsh", "input": map[string]any{}}}),
			anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"command": "ls -la"}`}}),
			anthropicEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
			anthropicEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use"}}),
			anthropicEvent("message_stop", map[string]any{"type": "message_stop"}))
	}
	f := newFakeProvider(t, bad, anthropicText("sorry"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	c := w.dial("m")
	c.send(sendReq("i1", "go"))
	got := c.until("done", 30*time.Second)
	call, ok := frameOf(got, "tool_call")
	if !ok || !strings.Contains(call.raw, `"input":"{\"command\": \"ls -la\"}"`) || !strings.Contains(call.raw, `"args":[]`) {
		t.Fatalf("tool_call %s", call.raw)
	}
	if r, _ := frameOf(got, "tool_result"); r.Status != "error" || !strings.Contains(r.Content, "invalid tool input") {
		t.Errorf("tool_result %s", r.raw)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	msgs, _ := requestBody(t, reqs[1])["messages"].([]any)
	in := string(compactJSON(msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)["input"]))
	if in != `{"command":"ls -la"}` {
		t.Errorf("sent back %s", in)
	}
	// The durable record says the same.
	for _, fr := range w.events("m", "default") {
		if fr.Type == "tool_call" && !strings.Contains(fr.raw, `"input":`) {
			t.Errorf("events.jsonl: %s", fr.raw)
		}
	}
}

var promptMsgHead = regexp.MustCompile(`(?m)^=== message \d+: (\S+) ===$`)

// TestExecEnvelopeIsBudgetedViewR4: an executable agent with a known window
// gets, in its envelope, the history view `ctx agent prompt` prints and the
// start hash describes — not the whole history up to 64 KiB. spec: R4 X5
// W9
func TestExecEnvelopeIsBudgetedViewR4(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("cap", map[string]string{"model": "anthropic/claude-sonnet-4-5\n", "window": "1000\n"})
	ws := t.TempDir()
	c := w.dial("cap")
	word := strings.Repeat("w", 700)
	for i := 0; i < 6; i++ {
		c.send(sendReq("e"+itoa(i), "echo "+itoa(i)+word, "workspace", ws))
		if got := c.until("done", 20*time.Second); got[len(got)-1].Status != "ok" {
			t.Fatalf("run %d: %v", i, types(got))
		}
	}
	r := w.ctx(ws, "", "agent", "prompt", "cap")
	m := hashLine.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("prompt: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	roles := promptMsgHead.FindAllStringSubmatch(r.stdout, -1)
	viewLen := len(roles) - 2 // minus system and the input
	if viewLen <= 0 || viewLen >= 12 {
		t.Fatalf("the prompt's history view has %d of 12 messages; the test needs a cut view", viewLen)
	}
	c.send(sendReq("cap", "capture", "workspace", ws))
	got := c.until("done", 20*time.Second)
	if got[len(got)-1].Status != "ok" {
		t.Fatalf("capture: %v", types(got))
	}
	if h := startFramePrompt(t, got); h != m[1] {
		t.Errorf("start frame prompt %q, ctx agent prompt %q", h, m[1])
	}
	raw, err := os.ReadFile(filepath.Join(ws, "envelope-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		History string `json:"history_messages"`
	}
	json.Unmarshal(raw, &env)
	var hist []map[string]any
	if err := json.Unmarshal([]byte(env.History), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) != viewLen {
		t.Errorf("envelope history has %d messages, the printed view %d", len(hist), viewLen)
	}
	if len(env.History) > 3000 {
		t.Errorf("envelope history is %d bytes against a 3,000-char budget", len(env.History))
	}
}
