package envelope

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func step0() *Envelope {
	return &Envelope{Schema: Schema, Run: "run-1", Step: 0, Input: "hello", HistoryMessages: "[]", ToolContext: ""}
}

func step1() *Envelope {
	return &Envelope{Schema: Schema, Run: "run-1", Step: 1, Input: "hello", HistoryMessages: `[{"role":"user","content":"hi"}]`,
		ToolContext: "bash: a shell", Observation: &Observation{ToolCallID: "call-1", Name: "tsh", Status: "ok", Content: "", Truncated: false}}
}

// historyOf returns a valid history_messages string of exactly n bytes.
func historyOf(n int) string { return `["` + strings.Repeat("h", n-4) + `"]` }

// TestEncodeExactBytes: one object in wire field order, then exactly one LF,
// and nothing else; HTML characters are not escaped. spec: X2, X3, X4
func TestEncodeExactBytes(t *testing.T) {
	cases := []struct {
		name string
		e    *Envelope
		want string
	}{
		{"step 0", step0(),
			`{"schema":"cortexfs.agent-invocation/v1","run":"run-1","step":0,"input":"hello","history_messages":"[]","tool_context":"","observation":null}` + "\n"},
		{"step 1", step1(),
			`{"schema":"cortexfs.agent-invocation/v1","run":"run-1","step":1,"input":"hello","history_messages":"[{\"role\":\"user\",\"content\":\"hi\"}]","tool_context":"bash: a shell","observation":{"tool_call_id":"call-1","name":"tsh","status":"ok","content":"","truncated":false}}` + "\n"},
		{"no html escaping", &Envelope{Schema: Schema, Run: "r", Input: "<a&b>\n\"é\"", HistoryMessages: "[]"},
			`{"schema":"cortexfs.agent-invocation/v1","run":"r","step":0,"input":"<a&b>\n\"é\"","history_messages":"[]","tool_context":"","observation":null}` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Encode(tc.e)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("\n got %s\nwant %s", got, tc.want)
			}
			if bytes.Count(got, []byte("\n")) != 1 || got[len(got)-1] != '\n' {
				t.Fatalf("not one object + one LF: %q", got)
			}
		})
	}
}

// TestEncodeRefuses: every violation the host could make is caught before
// a byte reaches the agent's stdin. spec: X2, X3, X4, X5
func TestEncodeRefuses(t *testing.T) {
	mod := func(base func() *Envelope, f func(e *Envelope)) *Envelope { e := base(); f(e); return e }
	cases := []struct {
		name string
		e    *Envelope
	}{
		{"wrong schema", mod(step0, func(e *Envelope) { e.Schema = "cortexfs.agent-invocation/v2" })},
		{"empty run", mod(step0, func(e *Envelope) { e.Run = "" })},
		{"negative step", mod(step0, func(e *Envelope) { e.Step = -1 })},
		{"step 0 with observation", mod(step1, func(e *Envelope) { e.Step = 0 })},                                                       // spec: X4
		{"step 1 without observation", mod(step0, func(e *Envelope) { e.Step = 1 })},                                                    // spec: X4
		{"history not an array", mod(step0, func(e *Envelope) { e.HistoryMessages = `{"a":1}` })},                                       // spec: X3
		{"history empty string", mod(step0, func(e *Envelope) { e.HistoryMessages = `` })},                                              // spec: X3
		{"history null", mod(step0, func(e *Envelope) { e.HistoryMessages = `null` })},                                                  // spec: X3
		{"history trailing data", mod(step0, func(e *Envelope) { e.HistoryMessages = `[] []` })},                                        // spec: X3
		{"history 64 KiB + 1", mod(step0, func(e *Envelope) { e.HistoryMessages = historyOf(MaxContext + 1) })},                         // spec: X5
		{"tool_context 64 KiB + 1", mod(step0, func(e *Envelope) { e.ToolContext = strings.Repeat("t", MaxContext+1) })},                // spec: X5
		{"observation.content 16 KiB + 1", mod(step1, func(e *Envelope) { e.Observation.Content = strings.Repeat("c", MaxContent+1) })}, // spec: X5
		{"observation.content invalid UTF-8", mod(step1, func(e *Envelope) { e.Observation.Content = "\xff" })},
		{"observation without call id", mod(step1, func(e *Envelope) { e.Observation.ToolCallID = "" })},
		{"observation without name", mod(step1, func(e *Envelope) { e.Observation.Name = "" })},
		{"observation without status", mod(step1, func(e *Envelope) { e.Observation.Status = "" })},
		{"input invalid UTF-8", mod(step0, func(e *Envelope) { e.Input = "a\xc3" })},                        // spec: X2
		{"tool_context invalid UTF-8", mod(step0, func(e *Envelope) { e.ToolContext = "\xed\xa0\x80" })},    // spec: X2
		{"over 1 MiB in all", mod(step0, func(e *Envelope) { e.Input = strings.Repeat("i", MaxEnvelope) })}, // spec: X2
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.e)
			if !errors.Is(err, ErrInvalid) || b != nil {
				t.Fatalf("want ErrInvalid, got %d bytes, %v", len(b), err)
			}
		})
	}
}

// TestEncodeBounds: each context string may be exactly 64 KiB and
// observation.content exactly 16 KiB; the whole envelope exactly 1 MiB
// including its LF. The input is bounded by the request (512 KiB), not by
// the 64 KiB context-string cap. spec: X2, X5
func TestEncodeBounds(t *testing.T) {
	e := step1()
	e.HistoryMessages = historyOf(MaxContext)
	e.ToolContext = strings.Repeat("é", MaxContext/2)
	e.Observation.Content = strings.Repeat("c", MaxContent)
	e.Input = strings.Repeat("i", 512<<10)
	b, err := Encode(e)
	if err != nil {
		t.Fatalf("context strings at their caps: %v", err)
	}
	got, err := Decode(b, "run-1", 1)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip at the caps: %v", err)
	}

	// Exactly 1 MiB including the newline is accepted; one byte more is not.
	e = step0()
	base, _ := Encode(e)
	e.Input += strings.Repeat("x", MaxEnvelope-len(base))
	if b, err := Encode(e); err != nil || len(b) != MaxEnvelope {
		t.Fatalf("envelope of exactly %d bytes: %d bytes, %v", MaxEnvelope, len(b), err)
	}
	e.Input += "x"
	if _, err := Encode(e); !errors.Is(err, ErrInvalid) {
		t.Fatalf("envelope of %d bytes: %v", MaxEnvelope+1, err)
	}
}

func enc(t *testing.T, e *Envelope) []byte {
	t.Helper()
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecode: what an agent does with its stdin. spec: X2, X3, X4, X5
func TestDecode(t *testing.T) {
	good0 := enc(t, step0())
	good1 := enc(t, step1())
	rep := func(b []byte, old, new string) []byte {
		t.Helper()
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%q not in %s", old, b)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	cases := []struct {
		name string
		in   []byte
		run  string
		step int
		ok   bool
	}{
		{"step 0", good0, "run-1", 0, true},
		{"step 1", good1, "run-1", 1, true},
		{"keys in another order", []byte(`{"observation":null,"tool_context":"","history_messages":"[]","input":"hello","step":0,"run":"run-1","schema":"cortexfs.agent-invocation/v1"}` + "\n"), "run-1", 0, true},
		{"wrong schema", rep(good0, Schema, "cortexfs.agent-invocation/v0"), "run-1", 0, false},
		{"missing field", rep(good0, `,"tool_context":""`, ``), "run-1", 0, false},
		{"missing observation", rep(good0, `,"observation":null`, ``), "run-1", 0, false},
		{"unknown field", rep(good0, `"observation":null`, `"observation":null,"extra":1`), "run-1", 0, false},
		{"unknown field instead of one", rep(good0, `"tool_context":""`, `"toolcontext":""`), "run-1", 0, false},
		{"field name case", rep(good0, `"schema"`, `"Schema"`), "run-1", 0, false},
		{"extra newline", append(append([]byte{}, good0...), '\n'), "run-1", 0, false},
		{"no newline", good0[:len(good0)-1], "run-1", 0, false},
		{"trailing data", append(append([]byte{}, good0...), "{}\n"...), "run-1", 0, false},
		{"trailing data before newline", rep(good0, "}\n", "} {}\n"), "run-1", 0, false},
		{"two objects one line", rep(good0, "}\n", "}{}\n"), "run-1", 0, false},
		{"empty", nil, "run-1", 0, false},
		{"just a newline", []byte("\n"), "run-1", 0, false},
		{"array", []byte("[]\n"), "run-1", 0, false},
		{"invalid UTF-8", rep(good0, `"hello"`, "\"hel\xfflo\""), "run-1", 0, false},
		{"observation with 4 fields", rep(good1, `,"truncated":false`, ``), "run-1", 1, false},
		{"observation with 6 fields", rep(good1, `"truncated":false`, `"truncated":false,"exit":0`), "run-1", 1, false},
		{"observation not an object", rep(good1, `{"tool_call_id"`, `[{"tool_call_id"`), "run-1", 1, false},
		{"observation at step 0", rep(good1, `"step":1`, `"step":0`), "run-1", 0, false},
		{"null observation at step 1", rep(good0, `"step":0`, `"step":1`), "run-1", 1, false},
		{"run differs from CTX_RUN", good0, "run-2", 0, false},
		{"step differs from CTX_STEP", good1, "run-1", 2, false},
		{"step as string", rep(good0, `"step":0`, `"step":"0"`), "run-1", 0, false},
		{"step as float", rep(good0, `"step":0`, `"step":0.5`), "run-1", 0, false},
		{"history not encoded as a string", rep(good0, `"history_messages":"[]"`, `"history_messages":[]`), "run-1", 0, false},
		{"history over 64 KiB", rep(good0, `"history_messages":"[]"`, `"history_messages":"[\"`+strings.Repeat("h", MaxContext)+`\"]"`), "run-1", 0, false},
		{"over 1 MiB", rep(good0, `"hello"`, `"`+strings.Repeat("x", MaxEnvelope)+`"`), "run-1", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Decode(tc.in, tc.run, tc.step)
			if tc.ok {
				if err != nil {
					t.Fatalf("Decode(%s): %v", tc.in, err)
				}
				if again := enc(t, e); !bytes.Equal(again, tc.in) && tc.name != "keys in another order" {
					t.Fatalf("re-encoded differs:\n%s\n%s", again, tc.in)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || e != nil {
				t.Fatalf("want ErrInvalid, got %+v, %v", e, err)
			}
		})
	}
}

// TestDecodeObservationKeysAreExact: the observation has exactly
// tool_call_id, name, status, content and truncated. encoding/json matches
// keys case-insensitively, so a case variant must not stand in for a
// missing field. spec: X3, X4
func TestDecodeObservationKeysAreExact(t *testing.T) {
	good1 := enc(t, step1())
	for name, in := range map[string][]byte{
		"case variant key": bytes.Replace(good1, []byte(`"truncated"`), []byte(`"Truncated"`), 1),
		"duplicate in another case, truncated missing": bytes.Replace(good1, []byte(`,"truncated":false`), []byte(`,"TOOL_CALL_ID":"call-9"`), 1),
	} {
		if e, err := Decode(in, "run-1", 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: accepted %s as %+v", name, in, e.Observation)
		}
	}
}

// TestEncodeRefusesInvalidUTF8IDs: Encode validates every string it writes.
// A run or observation id that is not valid UTF-8 would be rewritten to
// U+FFFD by encoding/json, so the agent would see a run that differs from
// CTX_RUN (X4) or an observation that is not the host's result. spec: X2, X4
func TestEncodeRefusesInvalidUTF8IDs(t *testing.T) {
	for name, e := range map[string]*Envelope{
		"run":                      {Schema: Schema, Run: "run-\x97", HistoryMessages: "[]"},
		"observation.tool_call_id": {Schema: Schema, Run: "r", Step: 1, HistoryMessages: "[]", Observation: &Observation{ToolCallID: "c\xff", Name: "tsh", Status: "ok"}},
		"observation.name":         {Schema: Schema, Run: "r", Step: 1, HistoryMessages: "[]", Observation: &Observation{ToolCallID: "c", Name: "ts\xffh", Status: "ok"}},
	} {
		b, err := Encode(e)
		if err == nil {
			_, derr := Decode(b, e.Run, e.Step)
			t.Errorf("%s: invalid UTF-8 accepted and written as %s (Decode with the same run: %v)", name, bytes.TrimSpace(b), derr)
		}
	}
}
