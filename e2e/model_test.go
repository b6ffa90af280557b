package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-ant-e2e-SECRET-0123456789"

// fakeProvider serves scripted streaming answers on loopback, in the wire
// formats of the provider API references (see internal/provider/testdata
// for the annotated transcripts these follow).
type fakeProvider struct {
	t      *testing.T
	srv    *http.Server
	url    string
	mu     sync.Mutex
	bodies []string
	script []func(w http.ResponseWriter, r *http.Request)
}

func newFakeProvider(t *testing.T, script ...func(w http.ResponseWriter, r *http.Request)) *fakeProvider {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProvider{t: t, url: "http://" + ln.Addr().String(), script: script}
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		i := len(f.bodies)
		f.bodies = append(f.bodies, r.Header.Get("x-api-key")+"\n"+r.Header.Get("Authorization")+"\n"+string(b))
		f.mu.Unlock()
		if i >= len(f.script) {
			http.Error(w, `{"type":"error","error":{"type":"api_error","message":"script over"}}`, 500)
			return
		}
		f.script[i](w, r)
	})}
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func (f *fakeProvider) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		io.WriteString(w, e+"\n\n")
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
}

func anthropicEvent(typ string, v any) string {
	b, _ := json.Marshal(v)
	return "event: " + typ + "\ndata: " + string(b)
}

func anthropicText(texts ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		ev := []string{
			anthropicEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-sonnet-4-5"}}),
			anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		}
		for _, t := range texts {
			ev = append(ev, anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": t}}))
		}
		ev = append(ev,
			anthropicEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
			anthropicEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}}),
			anthropicEvent("message_stop", map[string]any{"type": "message_stop"}))
		sse(w, ev...)
	}
}

func anthropicToolUse(id string, args ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		in, _ := json.Marshal(map[string]any{"args": args})
		sse(w,
			anthropicEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_2", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-sonnet-4-5"}}),
			anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": id, "name": "tsh", "input": map[string]any{}}}),
			anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}}),
			anthropicEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
			anthropicEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use"}}),
			anthropicEvent("message_stop", map[string]any{"type": "message_stop"}))
	}
}

func modelWorld(t *testing.T, f *fakeProvider, model string) *world {
	w := newWorld(t)
	w.start("ANTHROPIC_BASE_URL="+f.url, "ANTHROPIC_API_KEY="+testKey, "OPENAI_BASE_URL="+f.url+"/v1", "OPENAI_API_KEY="+testKey)
	w.tool("clock", "#!/bin/sh\necho 2026-12-02 12:00:00\n")
	w.mustCtx("agent", "create", "m", "--model", model)
	// A model agent's default policy allows the standard
	// toolset; widen it for the tests' own tools, as a person would.
	pol, err := os.ReadFile(filepath.Join(w.root, "agent", "m.d", "policy"))
	if err != nil || !strings.Contains(string(pol), "allow tool bash\n") {
		t.Fatalf("default policy of a model agent: %q %v", pol, err)
	}
	w.writeControl("m", "policy", string(pol)+"allow tool *\n")
	return w
}

// TestModelAgentToolRoundTrip: a model agent's tool call goes through the
// same tool path (tsh in the sandbox); the result is fed back in the
// provider's format; the last turn's text is the conclusion; the start
// frame carries the prompt hash; the key never reaches any file. spec: P1 K1 W11 B4 D9 R4
func TestModelAgentToolRoundTrip(t *testing.T) {
	f := newFakeProvider(t, anthropicToolUse("toolu_1", "call", "clock"), anthropicText("It is ", "noon."))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	c := w.dial("m")
	c.send(sendReq("q1", "what time is it?"))
	got := c.until("done", 30*time.Second)
	want := []string{"user", "start", "tool_call", "tool_result", "delta", "delta", "assistant", "done"}
	if strings.Join(types(got), ",") != strings.Join(want, ",") {
		t.Fatalf("frames %v, want %v", types(got), want)
	}
	if got[2].Name != "tsh" || strings.Join(got[2].Args, " ") != "call clock" || got[3].Content != "2026-12-02 12:00:00\n" {
		t.Errorf("tool: %s / %s", got[2].raw, got[3].raw)
	}
	if got[6].Text != "It is noon." || got[7].Status != "ok" {
		t.Errorf("conclusion: %s", got[6].raw)
	}
	if !strings.Contains(got[1].raw, `"prompt":"sha256:`) {
		t.Errorf("start frame has no prompt hash: %s", got[1].raw)
	}
	reqs := f.requests()
	if len(reqs) != 2 || !strings.HasPrefix(reqs[0], testKey) {
		t.Fatalf("provider saw %d requests", len(reqs))
	}
	if !strings.Contains(reqs[1], `"tool_result"`) || !strings.Contains(reqs[1], `toolu_1`) || !strings.Contains(reqs[1], "2026-12-02 12:00:00") {
		t.Errorf("second request lacks the tool result: %s", reqs[1])
	}
	if !strings.Contains(reqs[0], `"max_tokens":4096`) || !strings.Contains(reqs[0], `"name":"tsh"`) || !strings.Contains(reqs[0], "Your only native callable tool is tsh.") {
		t.Errorf("first request: %s", reqs[0])
	}
	// The key never reaches a file the run wrote.
	base := filepath.Dir(w.root)
	filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), testKey) {
				t.Errorf("the API key is in %s", p)
			}
		}
		return nil
	})
	if strings.Contains(w.log.String(), testKey) {
		t.Error("the API key is in the daemon log")
	}
	// P4: a replay never calls the provider again.
	c.send(sendReq("q1", "what time is it?"))
	c.until("done", 10*time.Second)
	if n := len(f.requests()); n != 2 {
		t.Errorf("replay called the provider: %d requests", n)
	}
}

// TestModelFallbackAndUnusable: a 500 moves to the next candidate with a
// failed candidate frame; an explicit window rules a candidate out as
// unusable. spec: W6
func TestModelFallbackAndUnusable(t *testing.T) {
	fail := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"type":"error","error":{"type":"api_error","message":"boom"}}`, 500)
	}
	// attempts: the anthropic candidate fails (retried), then openai answers.
	f := newFakeProvider(t, fail, fail, fail, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"from openai"},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	})
	os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o644)
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5,openai/gpt-4o")
	os.WriteFile(filepath.Join(w.root, "providers.json"), []byte(`{"providers":{"anthropic":{"attempts":3,"backoff":"10ms","max_backoff":"20ms"}}}`), 0o600)
	c := w.dial("m")
	c.send(sendReq("f1", "hello"))
	got := c.until("done", 30*time.Second)
	var cand, asst frame
	for _, fr := range got {
		switch fr.Type {
		case "candidate":
			cand = fr
		case "assistant":
			asst = fr
		}
	}
	if cand.Raw() == "" || !strings.Contains(cand.raw, `"status":"failed"`) || !strings.Contains(cand.raw, "claude-sonnet-4-5") {
		t.Errorf("candidate frame: %s (all: %v)", cand.raw, types(got))
	}
	if asst.Text != "from openai" {
		t.Errorf("assistant %s", asst.raw)
	}
	// An explicit window above gpt-4o's limit makes that candidate unusable.
	w.mustCtx("agent", "set", "m", "window", "150000")
	f2 := newFakeProvider(t, fail, fail, fail)
	_ = f2
	c.send(sendReq("f2", "hello again"))
	got = c.until("done", 30*time.Second)
	found := false
	for _, fr := range got {
		if fr.Type == "candidate" && strings.Contains(fr.raw, `"status":"unusable"`) && strings.Contains(fr.raw, "gpt-4o") {
			found = true
		}
	}
	if !found {
		t.Errorf("no unusable candidate frame: %v", types(got))
	}
	if b, _ := os.ReadFile(filepath.Join(w.root, "agent", "m.d", "window")); string(b) != "150000\n" {
		t.Errorf("window changed to %q", b)
	}
}

// TestModelCancelMidStream: cancel aborts the stream; no assistant text is
// recorded after cancelled. spec: X12 A5
func TestModelCancelMidStream(t *testing.T) {
	release := make(chan struct{})
	f := newFakeProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, anthropicEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "m", "type": "message", "role": "assistant", "content": []any{}}})+"\n\n")
		fmt.Fprint(w, anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})+"\n\n")
		for i := 0; i < 100; i++ {
			fmt.Fprint(w, anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "tick "}})+"\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	defer close(release)
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	c := w.dial("m")
	c.send(sendReq("slow", "talk slowly"))
	c.until("delta", 10*time.Second)
	w.mustCtx("agent", "cancel", "m")
	got := c.until("done", 10*time.Second)
	if got[len(got)-1].Status != "cancelled" {
		t.Fatalf("frames %v", types(got))
	}
	time.Sleep(500 * time.Millisecond)
	ev := w.events("m", "default")
	seenCancel := false
	for _, f := range ev {
		if f.Type == "cancelled" {
			seenCancel = true
		}
		if seenCancel && (f.Type == "delta" || f.Type == "assistant") {
			t.Errorf("recorded after cancel: %s", f.raw)
		}
		if f.Type == "assistant" {
			t.Errorf("an assistant conclusion for a cancelled run: %s", f.raw)
		}
	}
}

// Raw returns the frame's line (empty for the zero frame).
func (f frame) Raw() string { return f.raw }

// TestModelHistoryLeftOutIsSaid: when the history does not fit the window,
// older turns are left out of the view — never deleted — and a warning frame
// says how many. spec: W9 W8
func TestModelHistoryLeftOutIsSaid(t *testing.T) {
	long := strings.Repeat("history ", 400) // ~3,200 chars a turn
	f := newFakeProvider(t, anthropicText(long), anthropicText(long), anthropicText(long), anthropicText("short"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	w.mustCtx("agent", "set", "m", "window", "2500")
	c := w.dial("m")
	for i := 0; i < 4; i++ {
		c.send(sendReq("h"+itoa(i), "turn "+itoa(i)))
		got := c.until("done", 20*time.Second)
		if got[len(got)-1].Status != "ok" {
			t.Fatalf("run %d: %v", i, types(got))
		}
		if i < 3 {
			continue
		}
		found := false
		for _, fr := range got {
			if fr.Type == "warning" && strings.Contains(fr.Message, "older history messages were left out") {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning frame for the history left out: %v", types(got))
		}
	}
	// Nothing durable was deleted.
	users := 0
	for _, fr := range w.events("m", "default") {
		if fr.Type == "user" {
			users++
		}
	}
	if users != 4 {
		t.Errorf("%d user frames in the log", users)
	}
}

// withUsage wraps an Anthropic script so its message_start and
// message_delta report usage, as the API does.
func withUsage(in, out, cacheRead int, script func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		script(rec, r)
		lines := strings.Split(rec.Body.String(), "\n")
		for i, l := range lines {
			data, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				continue
			}
			var ev map[string]any
			if json.Unmarshal([]byte(data), &ev) != nil {
				continue
			}
			switch ev["type"] {
			case "message_start":
				ev["message"].(map[string]any)["usage"] = map[string]any{"input_tokens": in, "output_tokens": 1, "cache_read_input_tokens": cacheRead}
			case "message_delta":
				ev["usage"] = map[string]any{"output_tokens": out}
			default:
				continue
			}
			b, _ := json.Marshal(ev)
			lines[i] = "data: " + string(b)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Join(lines, "\n"))
	}
}

// TestModelUsageSummed: the done frame of a model run carries the token use
// the provider reported, summed over its turns; a run whose provider
// reported none has no usage field (nothing is made up); ctx agent
// sessions shows the sum.
func TestModelUsageSummed(t *testing.T) {
	f := newFakeProvider(t, withUsage(100, 10, 0, anthropicToolUse("toolu_1", "call", "clock")),
		withUsage(150, 5, 80, anthropicText("It is ", "noon.")), anthropicText("no usage"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	c := w.dial("m")
	c.send(sendReq("q1", "what time is it?"))
	got := c.until("done", 30*time.Second)
	done := got[len(got)-1]
	if !strings.Contains(done.raw, `"usage":{"input":250,"output":15,"cache_read":80}`) {
		t.Errorf("done frame: %s", done.raw)
	}
	c.send(sendReq("q2", "again"))
	got = c.until("done", 30*time.Second)
	if d := got[len(got)-1]; d.Status != "ok" || strings.Contains(d.raw, "usage") {
		t.Errorf("a run without reported usage: %s", d.raw)
	}
	if r := w.ctx("", "", "agent", "sessions", "m", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"input":250`) {
		t.Errorf("sessions: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
