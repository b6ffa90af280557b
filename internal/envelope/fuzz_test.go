package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode: Decode never panics and refuses only with ErrInvalid; what
// it accepts re-encodes to an envelope that decodes to the same value; and
// every envelope Encode accepts decodes back to itself (Encode∘Decode is
// the identity on valid envelopes). spec: X2, X3, X4, X5
func FuzzDecode(f *testing.F) {
	s0 := `{"schema":"cortexfs.agent-invocation/v1","run":"run-1","step":0,"input":"hello","history_messages":"[]","tool_context":"","observation":null}` + "\n"
	s1 := `{"schema":"cortexfs.agent-invocation/v1","run":"run-1","step":1,"input":"hi","history_messages":"[{\"role\":\"user\",\"content\":\"hi\"}]","tool_context":"bash","observation":{"tool_call_id":"call-1","name":"tsh","status":"ok","content":"12:00\n","truncated":false}}` + "\n"
	for _, seed := range []struct {
		raw               string
		run               string
		step              int
		input, hist, tctx string
		content           string
		truncated, hasObs bool
	}{
		{s0, "run-1", 0, "hello", "[]", "", "", false, false},
		{s1, "run-1", 1, "<&>", `[{"role":"user","content":"x"}]`, "tools", "out", true, true},
		{strings.Replace(s0, "\n", "\n\n", 1), "run-1", 0, "", "[ ]", "", "", false, false},
		{strings.Replace(s1, `"truncated":false`, `"Truncated":false`, 1), "run-1", 1, "é", "[1,2]", "ctx", "\uFFFD", false, true},
		{strings.Replace(s0, `"step":0`, `"step":1`, 1), "run-1", 1, "x", "{}", "", "", false, true},
		{strings.Replace(s0, `"schema"`, `"Schema"`, 1), "run-1", 0, "x", "null", "", "", false, false},
		{"\xff\n", "", -1, "\xff", "[", "\xc3", "\xe2\x82", false, true},
		{"", "run-1", 0, "", "", "", "", false, false},
	} {
		f.Add([]byte(seed.raw), seed.run, seed.step, seed.input, seed.hist, seed.tctx, seed.content, seed.truncated, seed.hasObs)
	}
	f.Fuzz(func(t *testing.T, raw []byte, run string, step int, input, hist, tctx, content string, truncated, hasObs bool) {
		// Decode arbitrary bytes.
		e, err := Decode(raw, run, step)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || e != nil {
				t.Fatalf("Decode: %+v, %v", e, err)
			}
		} else {
			b, err := Encode(e)
			if err != nil {
				t.Fatalf("accepted %q but cannot re-encode: %v", raw, err)
			}
			e2, err := Decode(b, run, step)
			if err != nil || !reflect.DeepEqual(e, e2) {
				t.Fatalf("re-decode: %v\n%+v\n%+v", err, e, e2)
			}
		}

		// Encode an envelope built from the parts; if valid, it round-trips.
		// A run that is not valid UTF-8 is accepted by Encode and rewritten
		// to U+FFFD (TestEncodeRefusesInvalidUTF8IDs); skip it here so the
		// fuzzer keeps exploring the other properties.
		if !utf8.ValidString(run) {
			return
		}
		env := &Envelope{Schema: Schema, Run: run, Step: step, Input: input, HistoryMessages: hist, ToolContext: tctx}
		if hasObs {
			env.Observation = &Observation{ToolCallID: "call-1", Name: "tsh", Status: "ok", Content: content, Truncated: truncated}
		}
		b, err := Encode(env)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Encode: %v", err)
			}
			return
		}
		if len(b) > MaxEnvelope || b[len(b)-1] != '\n' || bytes.IndexByte(b[:len(b)-1], '\n') >= 0 || !utf8.Valid(b) {
			t.Fatalf("Encode broke X2: %q", b)
		}
		got, err := Decode(b, run, step)
		if err != nil {
			t.Fatalf("Decode(Encode(e)): %v\n%s", err, b)
		}
		if !reflect.DeepEqual(got, env) {
			t.Fatalf("round trip:\n%+v\n%+v", got, env)
		}
	})
}

// FuzzParseLine: the agent-output parser never panics, refuses only with
// ErrInvalidOutput, and accepts only the two shapes; an accepted line
// re-marshalled in canonical form parses to the same value. spec: X8, X9
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"type":"delta","text":"hi"}`,
		`{"type":"delta","text":""}`,
		`{"type":"tool_call","id":"call-1","name":"tsh","args":["load","bash"]}`,
		`{"type":"tool_call","id":"c","name":"clock","args":[]}`,
		`{"type":"tool_result","call_id":"c","name":"tsh","status":"ok","content":"","truncated":false}`,
		`{"type":"approval","run":"r","id":"c","decision":"allow_once"}`,
		`{"type":"done","run":"r","id":"m","status":"ok"}`,
		`{"type":"delta","text":"x","run":"r"}`,
		`{"type":"tool_call","id":"c","name":"tsh"}`,
		`{"type":"tool_call","id":"c","name":"tsh","args":[1]}`,
		`{"type":"delta","TEXT":"x"}`,
		`{"type":"delta","text":"a","text":"b"}`,
		"{\"type\":\"delta\",\"text\":\"\xff\"}",
		`{"type":"delta","text":"\ud800"}`,
		`{"type":`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLine(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidOutput) || l != nil {
				t.Fatalf("ParseLine: %+v, %v", l, err)
			}
			return
		}
		var canon any
		switch l.Type {
		case "delta":
			canon = struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{l.Type, l.Text}
		case "tool_call":
			if l.ID == "" || l.Name == "" || l.Args == nil {
				t.Fatalf("incomplete tool_call accepted: %+v", l)
			}
			canon = struct {
				Type string   `json:"type"`
				ID   string   `json:"id"`
				Name string   `json:"name"`
				Args []string `json:"args"`
			}{l.Type, l.ID, l.Name, l.Args}
		default:
			t.Fatalf("type %q accepted", l.Type)
		}
		j, err := json.Marshal(canon)
		if err != nil {
			t.Fatal(err)
		}
		if len(j) > MaxOutputLine {
			return // escaping can grow a line past the limit
		}
		l2, err := ParseLine(j)
		if err != nil || !reflect.DeepEqual(l, l2) {
			t.Fatalf("canonical form %s: %+v, %v", j, l2, err)
		}
	})
}
