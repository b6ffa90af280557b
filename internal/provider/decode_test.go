package provider

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// decodeAll feeds payloads to a decoder and collects its events.
func decodeAll(feed func(string, func(Event) error) (bool, error), payloads []string) ([]Event, bool, error) {
	var evs []Event
	emit := func(ev Event) error { evs = append(evs, ev); return nil }
	for _, p := range payloads {
		done, err := feed(p, emit)
		if err != nil || done {
			return evs, done, err
		}
	}
	return evs, false, nil
}

func TestAnthropicDecoder(t *testing.T) {
	const (
		start    = `{"type":"message_start","message":{}}`
		text0    = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
		tool1    = `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"tsh","input":{}}}`
		stop0    = `{"type":"content_block_stop","index":0}`
		stop1    = `{"type":"content_block_stop","index":1}`
		msgStop  = `{"type":"message_stop"}`
		endTurn  = `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`
		toolStop = `{"type":"message_delta","delta":{"stop_reason":"tool_use"}}`
	)
	json1 := func(s string) string {
		return `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":` + s + `}}`
	}
	tests := []struct {
		name     string
		payloads []string
		want     []Event
		done     bool
		err      error
	}{
		{"text", []string{start, text0, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`, stop0, endTurn, msgStop},
			[]Event{{Kind: EventDelta, Text: "hi"}, {Kind: EventDone, StopReason: "end_turn"}}, true, nil},
		{"initial text in block start", []string{`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"pre"}}`, msgStop},
			[]Event{{Kind: EventDelta, Text: "pre"}, {Kind: EventDone}}, true, nil},
		{"tool call emitted at message_stop", []string{start, tool1, json1(`"{\"args\":"`), json1(`"[\"a\",\"b\"]}"`), stop1, toolStop},
			nil, false, nil},
		{"tool call", []string{tool1, json1(`"{\"args\":[\"a\",\"b\"]}"`), stop1, toolStop, msgStop},
			[]Event{{Kind: EventToolCall, CallID: "t1", Name: "tsh", Args: []string{"a", "b"}, Input: `{"args":["a","b"]}`}, {Kind: EventDone, StopReason: "tool_use"}}, true, nil},
		{"empty args", []string{tool1, json1(`"{\"args\":[]}"`), stop1, msgStop},
			[]Event{{Kind: EventToolCall, CallID: "t1", Name: "tsh", Args: []string{}, Input: `{"args":[]}`}, {Kind: EventDone}}, true, nil},
		{"tool input without args", []string{tool1, json1(`"{\"cmd\":\"ls\"}"`), stop1, msgStop},
			[]Event{{Kind: EventToolCall, CallID: "t1", Name: "tsh", ArgsError: `tool input has no "args" array`, Input: `{"cmd":"ls"}`}, {Kind: EventDone}}, true, nil},
		{"tool input empty", []string{tool1, stop1, msgStop},
			[]Event{{Kind: EventToolCall, CallID: "t1", Name: "tsh", ArgsError: `tool input is empty; expected {"args":["..."]}`}, {Kind: EventDone}}, true, nil},
		{"unknown events and deltas ignored", []string{`{"type":"future_event"}`, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`, stop0, `{"type":"ping"}`, msgStop},
			// The thinking block comes back for replay (servertools_test.go).
			[]Event{{Kind: EventDone, Content: json.RawMessage(`[{"thinking":"hmm","type":"thinking"}]`)}}, true, nil},
		{"not json", []string{`{"type":`}, nil, false, ErrMalformed},
		{"no type", []string{`{}`}, nil, false, ErrMalformed},
		{"delta for unknown block", []string{`{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}`}, nil, false, ErrMalformed},
		{"text delta in tool block", []string{tool1, `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}}`}, nil, false, ErrMalformed},
		{"json delta in text block", []string{text0, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`}, nil, false, ErrMalformed},
		{"block started twice", []string{text0, text0}, nil, false, ErrMalformed},
		{"tool_use without id", []string{`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"tsh"}}`}, nil, false, ErrMalformed},
		{"stop for unknown block", []string{stop1}, nil, false, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &anthropicDecoder{name: "anthropic"}
			got, done, err := decodeAll(d.event, tt.payloads)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if done != tt.done || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("done %v events %+v, want %v %+v", done, got, tt.done, tt.want)
			}
		})
	}
}

func TestAnthropicErrorEventMapping(t *testing.T) {
	for typ, code := range map[string]int{"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500, "invalid_request_error": 400, "new_kind": 500} {
		d := &anthropicDecoder{name: "anthropic"}
		_, err := d.event(`{"type":"error","error":{"type":"`+typ+`","message":"m"}}`, func(Event) error { return nil })
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code {
			t.Errorf("%s: %v, want code %d", typ, err, code)
		}
	}
}

func TestOpenAIDecoder(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `{"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
	}
	tests := []struct {
		name     string
		payloads []string
		want     []Event
		done     bool
		err      error
	}{
		{"text", []string{chunk(`{"role":"assistant","content":""}`, "null"), chunk(`{"content":"hi"}`, "null"), chunk(`{}`, `"stop"`), "[DONE]"},
			[]Event{{Kind: EventDelta, Text: "hi"}, {Kind: EventDone, StopReason: "stop"}}, true, nil},
		{"null content", []string{chunk(`{"content":null}`, "null"), "[DONE]"}, []Event{{Kind: EventDone}}, true, nil},
		{"fragmented tool call", []string{
			chunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"tsh","arguments":""}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"args\":[\"x"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"]}"}}]}`, "null"),
			chunk(`{}`, `"tool_calls"`), "[DONE]"},
			[]Event{{Kind: EventToolCall, CallID: "c1", Name: "tsh", Args: []string{"x"}, Input: `{"args":["x"]}`}, {Kind: EventDone, StopReason: "tool_calls"}}, true, nil},
		{"whole call in one chunk, no index, no id (some local servers)", []string{
			chunk(`{"tool_calls":[{"function":{"name":"tsh","arguments":"{\"args\":[\"list\"]}"}}]}`, `"tool_calls"`), "[DONE]"},
			[]Event{{Kind: EventToolCall, CallID: "call_0", Name: "tsh", Args: []string{"list"}, Input: `{"args":["list"]}`}, {Kind: EventDone, StopReason: "tool_calls"}}, true, nil},
		{"name repeated in every chunk", []string{
			chunk(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"tsh","arguments":"{\"args\":"}}]}`, "null"),
			chunk(`{"tool_calls":[{"index":0,"function":{"name":"tsh","arguments":"[]}"}}]}`, "null"), "[DONE]"},
			[]Event{{Kind: EventToolCall, CallID: "c1", Name: "tsh", Args: []string{}, Input: `{"args":[]}`}, {Kind: EventDone}}, true, nil},
		{"args not strings", []string{chunk(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"tsh","arguments":"{\"args\":[1]}"}}]}`, "null"), "[DONE]"},
			nil, true, nil}, // checked below: ArgsError set
		{"other choices ignored", []string{`{"choices":[{"index":1,"delta":{"content":"no"},"finish_reason":null}]}`, "[DONE]"},
			[]Event{{Kind: EventDone}}, true, nil},
		{"usage chunk without choices", []string{`{"choices":[],"usage":{"prompt_tokens":1}}`, "[DONE]"}, []Event{{Kind: EventDone, Usage: &Usage{Input: 1}}}, true, nil},
		{"usage with cached tokens", []string{`{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":100}}}`, "[DONE]"},
			[]Event{{Kind: EventDone, Usage: &Usage{Input: 120, Output: 7, CacheRead: 100}}}, true, nil},
		{"not json", []string{`{"choices":`}, nil, false, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &openaiDecoder{name: "openai"}
			got, done, err := decodeAll(d.event, tt.payloads)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if tt.name == "args not strings" {
				if len(got) != 2 || got[0].ArgsError == "" || got[0].Args != nil {
					t.Fatalf("events %+v", got)
				}
				return
			}
			if done != tt.done || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("done %v events %+v, want %v %+v", done, got, tt.done, tt.want)
			}
		})
	}
}

func TestOpenAIErrorChunk(t *testing.T) {
	for body, code := range map[string]int{
		`{"error":{"message":"boom","type":"server_error","code":null}}`:             500,
		`{"error":{"message":"slow down","type":"rate_limit_exceeded","code":null}}`: 429,
		`{"error":{"message":"bad","type":"invalid_request_error","code":400}}`:      400,
	} {
		d := &openaiDecoder{name: "openai"}
		_, err := d.event(body, func(Event) error { return nil })
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code {
			t.Errorf("%s: %v, want %d", body, err, code)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`{"args":["a","b c"]}`:          {"a", "b c"},
		`{"args":[]}`:                   {},
		`{"args":["x"],"extra":true}`:   {"x"},
		` {"args" : ["\u00e9\n"] } `:    {"é\n"},
		`{"args":["--","-rf","/"]}`:     {"--", "-rf", "/"},
		`{"args":["a"]}` + "\n\t":       {"a"},
		`{"args":["` + "\u2028" + `"]}`: {"\u2028"},
	} {
		got, why := parseArgs(in)
		if why != "" || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q %q", in, got, why)
		}
	}
	for _, in := range []string{``, `[]`, `{"args":null}`, `{"args":"ls"}`, `{"args":[1]}`, `{"a`, `{}`} {
		if got, why := parseArgs(in); why == "" || got != nil {
			t.Errorf("%q accepted: %q", in, got)
		}
	}
}

func TestEncodeMergesAndSkipsEmpty(t *testing.T) {
	a := NewAnthropic(ProviderConfig{Name: "anthropic", BaseURL: "http://127.0.0.1:1", MaxTokens: 100})
	defer a.CloseIdleConnections()
	req := Request{Model: "m", MaxTokens: 0, Messages: []Message{
		{Role: RoleUser, Text: "a"}, {Role: RoleUser, Text: ""}, {Role: RoleUser, Text: "b"},
		{Role: RoleAssistant, Text: ""}, {Role: RoleAssistant, Text: "c"},
	}}
	body, err := a.encode(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":[{"type":"text","text":"c"}]}],"stream":true}`
	if string(body) != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	if _, err := a.encode(Request{Messages: []Message{{Role: RoleTool, Text: "x"}}}); err == nil {
		t.Fatal("tool result without call id accepted")
	}
	if _, err := a.encode(Request{Messages: []Message{{Role: "system", Text: "x"}}}); err == nil {
		t.Fatal("unknown role accepted")
	}
}
