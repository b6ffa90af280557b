package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const testKey = "sk-test-7f3a9c1e5b2d4086-SECRET"

func TestTextOnly(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, replay(t, fixture(kind, "text")))
			p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
			var rec recorder
			if err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), rec.emit); err != nil {
				t.Fatal(err)
			}
			stop := map[string]string{KindAnthropic: "end_turn", KindOpenAI: "stop"}[kind]
			want := []Event{{Kind: EventDelta, Text: "Hello"}, {Kind: EventDelta, Text: ", world."}, {Kind: EventDone, StopReason: stop}}
			if kind == KindAnthropic {
				// Input from message_start, the cumulative
				// output of the last message_delta.
				want[2].Usage = &Usage{Input: 25, Output: 15}
			}
			if got := rec.all(); !reflect.DeepEqual(got, want) {
				t.Fatalf("events %+v, want %+v", got, want)
			}
			h, body := srv.headers[0], srv.body(t, 0)
			if body["stream"] != true || body["model"] != "m" {
				t.Errorf("body stream/model: %v %v", body["stream"], body["model"])
			}
			// The only native tool is tsh with the pinned argv schema. spec: K1
			var schema any
			_ = json.Unmarshal([]byte(ToolInputSchema), &schema)
			switch kind {
			case KindAnthropic:
				if srv.paths[0] != "/v1/messages" || h.Get("x-api-key") != testKey || h.Get("anthropic-version") != "2023-06-01" {
					t.Errorf("path %s headers %v", srv.paths[0], h)
				}
				// spec: W11 — max_tokens is the configured output limit.
				if body["max_tokens"] != float64(DefaultMaxTokens) || body["system"] != "You are a test." {
					t.Errorf("max_tokens %v system %v", body["max_tokens"], body["system"])
				}
				if get(t, body, "tools", 0, "name") != "tsh" || !reflect.DeepEqual(get(t, body, "tools", 0, "input_schema"), schema) {
					t.Errorf("tools %v", body["tools"])
				}
				if n := len(body["tools"].([]any)); n != 1 {
					t.Errorf("%d tools offered", n)
				}
			case KindOpenAI:
				if srv.paths[0] != "/v1/chat/completions" || h.Get("Authorization") != "Bearer "+testKey {
					t.Errorf("path %s headers %v", srv.paths[0], h)
				}
				if get(t, body, "messages", 0, "role") != "system" || get(t, body, "messages", 1, "content") != "hi" {
					t.Errorf("messages %v", body["messages"])
				}
				if get(t, body, "tools", 0, "type") != "function" || get(t, body, "tools", 0, "function", "name") != "tsh" ||
					!reflect.DeepEqual(get(t, body, "tools", 0, "function", "parameters"), schema) {
					t.Errorf("tools %v", body["tools"])
				}
				if _, ok := body["max_completion_tokens"]; ok {
					t.Errorf("max_completion_tokens sent though not configured: %v", body)
				}
			}
		})
	}
}

func TestOpenAINoKeyNoAuthorization(t *testing.T) {
	srv := newServer(t, replay(t, fixture(KindOpenAI, "text")))
	pc := testConfig("local", KindOpenAI, srv.URL, "")
	pc.MaxTokens, pc.MaxTokensField = 512, "max_tokens"
	p := newProvider(t, pc)
	var rec recorder
	if err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), rec.emit); err != nil {
		t.Fatal(err)
	}
	if v, ok := srv.headers[0]["Authorization"]; ok {
		t.Fatalf("Authorization sent without a key: %v", v)
	}
	if b := srv.body(t, 0); b["max_tokens"] != float64(512) { // spec: W11
		t.Fatalf("max_tokens %v", b["max_tokens"])
	}
}

// TestToolRoundTrip: request 1 returns a tsh call; request 2 carries the
// result in the provider's own format and gets text.
func TestToolRoundTrip(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, replay(t, fixture(kind, "tool_use")), replay(t, fixture(kind, "after_tool")))
			p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
			ctx := ctxTimeout(t, 10*time.Second)
			req := userTurn("which tools do I have?")
			var rec recorder
			if err := p.Stream(ctx, req, rec.emit); err != nil {
				t.Fatal(err)
			}
			evs := rec.all()
			var call Event
			for _, ev := range evs {
				if ev.Kind == EventToolCall {
					call = ev
				}
			}
			if call.Name != "tsh" || !reflect.DeepEqual(call.Args, []string{"list"}) || call.CallID == "" || call.ArgsError != "" {
				t.Fatalf("tool call %+v (events %+v)", call, evs)
			}
			if last := evs[len(evs)-1]; last.Kind != EventDone || (last.StopReason != "tool_use" && last.StopReason != "tool_calls") {
				t.Fatalf("last event %+v", last)
			}
			req.Messages = append(req.Messages,
				Message{Role: RoleAssistant, Text: rec.text(), ToolCallID: call.CallID, ToolName: call.Name, ToolArgs: call.Args},
				Message{Role: RoleTool, ToolCallID: call.CallID, ToolName: call.Name, Text: "bash\ngit\n"})
			var rec2 recorder
			if err := p.Stream(ctx, req, rec2.emit); err != nil {
				t.Fatal(err)
			}
			if rec2.text() != "You have bash and git." {
				t.Fatalf("second turn text %q", rec2.text())
			}
			b := srv.body(t, 1)
			switch kind {
			case KindAnthropic:
				asst := get(t, b, "messages", 1)
				if get(t, asst, "role") != "assistant" || get(t, asst, "content", 0, "type") != "text" ||
					get(t, asst, "content", 1, "type") != "tool_use" || get(t, asst, "content", 1, "id") != call.CallID ||
					!reflect.DeepEqual(get(t, asst, "content", 1, "input"), map[string]any{"args": []any{"list"}}) {
					t.Fatalf("assistant message %v", asst)
				}
				res := get(t, b, "messages", 2)
				if get(t, res, "role") != "user" || get(t, res, "content", 0, "type") != "tool_result" ||
					get(t, res, "content", 0, "tool_use_id") != call.CallID || get(t, res, "content", 0, "content") != "bash\ngit\n" {
					t.Fatalf("tool result message %v", res)
				}
			case KindOpenAI:
				asst := get(t, b, "messages", 2)
				if get(t, asst, "role") != "assistant" || get(t, asst, "tool_calls", 0, "id") != call.CallID ||
					get(t, asst, "tool_calls", 0, "type") != "function" || get(t, asst, "tool_calls", 0, "function", "name") != "tsh" ||
					get(t, asst, "tool_calls", 0, "function", "arguments") != `{"args":["list"]}` {
					t.Fatalf("assistant message %v", asst)
				}
				res := get(t, b, "messages", 3)
				if get(t, res, "role") != "tool" || get(t, res, "tool_call_id") != call.CallID || get(t, res, "content") != "bash\ngit\n" {
					t.Fatalf("tool message %v", res)
				}
			}
		})
	}
}

func TestTwoToolCalls(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, replay(t, fixture(kind, "two_tools")), replay(t, fixture(kind, "after_tool")))
			p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
			ctx := ctxTimeout(t, 10*time.Second)
			req := userTurn("go")
			var rec recorder
			if err := p.Stream(ctx, req, rec.emit); err != nil {
				t.Fatal(err)
			}
			var calls []Event
			for _, ev := range rec.all() {
				if ev.Kind == EventToolCall {
					calls = append(calls, ev)
				}
			}
			if len(calls) != 2 || !reflect.DeepEqual(calls[0].Args, []string{"load", "bash"}) ||
				!reflect.DeepEqual(calls[1].Args, []string{"call", "bash", "-c", `echo "hi"`}) || calls[0].CallID == calls[1].CallID {
				t.Fatalf("calls %+v", calls)
			}
			for _, c := range calls {
				req.Messages = append(req.Messages, Message{Role: RoleAssistant, ToolCallID: c.CallID, ToolName: c.Name, ToolArgs: c.Args})
			}
			req.Messages = append(req.Messages,
				Message{Role: RoleTool, ToolCallID: calls[0].CallID, ToolName: "tsh", Text: "loaded"},
				Message{Role: RoleTool, ToolCallID: calls[1].CallID, ToolName: "tsh", Text: "exit 1", IsError: true})
			if err := p.Stream(ctx, req, (&recorder{}).emit); err != nil {
				t.Fatal(err)
			}
			b := srv.body(t, 1)
			msgs := b["messages"].([]any)
			switch kind {
			case KindAnthropic: // one assistant message with both tool_use blocks, one user message with both results
				if len(msgs) != 3 || len(get(t, msgs[1], "content").([]any)) != 2 || len(get(t, msgs[2], "content").([]any)) != 2 ||
					get(t, msgs[2], "content", 1, "is_error") != true || get(t, msgs[2], "content", 1, "tool_use_id") != calls[1].CallID {
					t.Fatalf("messages %v", msgs)
				}
			case KindOpenAI: // system, user, one assistant with two tool_calls, two tool messages
				if len(msgs) != 5 || len(get(t, msgs[2], "tool_calls").([]any)) != 2 ||
					get(t, msgs[4], "tool_call_id") != calls[1].CallID || get(t, msgs[4], "content") != "[error] exit 1" {
					t.Fatalf("messages %v", msgs)
				}
			}
		})
	}
}

func TestMalformedStream(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, replay(t, fixture(kind, "malformed")))
			p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
			var rec recorder
			err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), rec.emit)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "not JSON") {
				t.Fatalf("err %v, want a clear ErrMalformed", err)
			}
			for _, ev := range rec.all() {
				if ev.Kind == EventDone {
					t.Fatal("malformed stream reported done")
				}
			}
		})
	}
}

func TestNotAnEventStream(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>captive portal</html>"))
	})
	p := newProvider(t, testConfig("openai", KindOpenAI, srv.URL, ""))
	err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), (&recorder{}).emit)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "text/html") {
		t.Fatalf("err %v", err)
	}
}

// TestDisconnectMidStream: a dropped connection and a stream that ends early
// are errors, never a completed turn.
func TestDisconnectMidStream(t *testing.T) {
	for _, kind := range kinds {
		for name, st := range map[string]func() step{
			"abort":     func() step { return abortAfter(t, fixture(kind, "text"), 3) },
			"clean eof": func() step { return replay(t, fixture(kind, "cut")) },
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				srv := newServer(t, st())
				p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
				var rec recorder
				err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), rec.emit)
				if !errors.Is(err, ErrIncomplete) {
					t.Fatalf("err %v, want ErrIncomplete", err)
				}
				for _, ev := range rec.all() {
					if ev.Kind != EventDelta {
						t.Fatalf("fake completion: %+v", ev)
					}
				}
			})
		}
	}
}

func TestAnthropicErrorEvent(t *testing.T) {
	srv := newServer(t, replay(t, "anthropic_overloaded.sse"))
	p := newProvider(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey))
	err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), (&recorder{}).emit)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 529 || se.Type != "overloaded_error" || !se.Retryable() {
		t.Fatalf("err %v", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
			pc := testConfig(kind, kind, srv.URL, testKey)
			pc.IdleTimeout = 100 * time.Millisecond
			p := newProvider(t, pc)
			start := time.Now()
			err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), (&recorder{}).emit)
			if !errors.Is(err, ErrConnection) || !strings.Contains(err.Error(), "no data for") || !retryable(err) {
				t.Fatalf("err %v", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("idle timeout took %v", d)
			}
		})
	}
}

// slowStream sends one text delta every 10ms until the client goes away.
func slowStream(kind string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if kind == KindAnthropic {
			_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"))
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ev string
			if kind == KindAnthropic {
				ev = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"tick \"}}\n\n"
			} else {
				ev = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tick \"},\"finish_reason\":null}]}\n\n"
			}
			if _, err := w.Write([]byte(ev)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	}
}

// TestCancelMidDelta: cancelling stops the stream at once; nothing is
// emitted after cancel and Stream returns promptly. spec: X12
func TestCancelMidDelta(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, slowStream(kind))
			p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var n, after atomic.Int32
			var cancelledAt time.Time
			err := p.Stream(ctx, userTurn("hi"), func(ev Event) error {
				if ctx.Err() != nil {
					after.Add(1)
				}
				if n.Add(1) == 3 {
					cancelledAt = time.Now()
					cancel() // the run actor got `cancel` while deltas flow
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if d := time.Since(cancelledAt); d > time.Second {
				t.Fatalf("returned %v after cancel", d)
			}
			if n.Load() != 3 || after.Load() != 0 {
				t.Fatalf("%d events, %d after cancel", n.Load(), after.Load())
			}
		})
	}
}

// TestCancelFromOutside cancels from another goroutine while Stream blocks
// in a read.
func TestCancelFromOutside(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t, slowStream(kind))
			p := newProvider(t, testConfig(kind, kind, srv.URL, testKey))
			ctx, cancel := context.WithCancel(context.Background())
			first := make(chan struct{})
			var once atomic.Bool
			done := make(chan error, 1)
			go func() {
				done <- p.Stream(ctx, userTurn("hi"), func(Event) error {
					if once.CompareAndSwap(false, true) {
						close(first)
					}
					return nil
				})
			}()
			<-first
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err %v", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Stream did not return after cancel")
			}
		})
	}
}

func TestEmitErrorEndsStream(t *testing.T) {
	srv := newServer(t, replay(t, "anthropic_text.sse"))
	p := newProvider(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey))
	stop := errors.New("tool budget exhausted")
	err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), func(Event) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err %v", err)
	}
}

// TestOpenAIFinishThenEOF: a compatible server that closes right after the
// finish_reason chunk (no [DONE]) has sent the whole message.
func TestOpenAIFinishThenEOF(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = w.Write([]byte(body))
	})
	p := newProvider(t, testConfig("local", KindOpenAI, srv.URL, ""))
	var rec recorder
	if err := p.Stream(ctxTimeout(t, 10*time.Second), userTurn("hi"), rec.emit); err != nil {
		t.Fatal(err)
	}
	if evs := rec.all(); len(evs) != 2 || !reflect.DeepEqual(evs[1], Event{Kind: EventDone, StopReason: "stop"}) {
		t.Fatalf("events %+v", evs)
	}
}
