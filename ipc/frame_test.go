package ipc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestFrameRequiredFieldsWhenZero: each type emits the fields of its row
// in interfaces.md "Socket frames" even when they are zero, so a client
// never has to guess a default. spec: P2, P3, X8
func TestFrameRequiredFieldsWhenZero(t *testing.T) {
	cases := []struct {
		f    Frame
		want string
	}{
		{Frame{Type: TypeUser}, `{"type":"user","run":"","id":"","text":""}`},
		{Frame{Type: TypeStart}, `{"type":"start","run":"","id":"","op":""}`},
		{Frame{Type: TypeDelta, Run: "r"}, `{"type":"delta","run":"r","text":""}`},
		{Frame{Type: TypeToolCall, Run: "r", CallID: "c", Name: "tsh"}, `{"type":"tool_call","run":"r","call_id":"c","name":"tsh","args":[]}`},
		{Frame{Type: TypeToolCall, Run: "r", CallID: "c", Name: "tsh", Args: []string{}}, `{"type":"tool_call","run":"r","call_id":"c","name":"tsh","args":[]}`},
		{Frame{Type: TypeApprovalRequest}, `{"type":"approval_request","run":"","id":"","name":"","args":[],"timeout_ms":0}`},
		{Frame{Type: TypeApproval}, `{"type":"approval","run":"","id":"","decision":""}`},
		{Frame{Type: TypeToolResult, Run: "r", CallID: "c", Name: "tsh", Status: "ok"},
			`{"type":"tool_result","run":"r","call_id":"c","name":"tsh","status":"ok","content":"","truncated":false}`},
		{Frame{Type: TypeAssistant, Run: "r"}, `{"type":"assistant","run":"r","text":""}`},
		{Frame{Type: TypeError}, `{"type":"error","code":"","message":""}`},
		{Frame{Type: TypeCancelled}, `{"type":"cancelled","run":""}`},
		{Frame{Type: TypeCandidate}, `{"type":"candidate","run":"","status":"","model":"","reason":""}`},
		{Frame{Type: TypeDone}, `{"type":"done","run":"","id":"","status":""}`},
		{Frame{Type: TypeWarning}, `{"type":"warning","run":"","message":""}`},
		{Frame{Type: TypeCaughtUp, Session: "default"}, `{"type":"caught_up","session":"default","active_run":null}`},
		{Frame{Type: TypeCaughtUp, Session: "default", ActiveRun: strp("run-2")}, `{"type":"caught_up","session":"default","active_run":"run-2"}`},
		{Frame{Type: TypePong}, `{"type":"pong","version":""}`},
		{Frame{Type: TypeAck}, `{"type":"ack","run":"","op":""}`},
	}
	for _, tc := range cases {
		t.Run(tc.f.Type, func(t *testing.T) {
			got, err := tc.f.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tc.want)) {
				t.Fatalf("\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

// jsonEqual compares two objects as key sets with values, ignoring order
// (order is pinned by TestFrameFieldOrder).
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y map[string]any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestFrameFieldOrder pins the exact bytes of full frames: type, session,
// seq, ts first, then a stable order, one object per line. spec: P2
func TestFrameFieldOrder(t *testing.T) {
	cases := []struct {
		f    Frame
		want string
	}{
		{Frame{Type: TypeUser, Session: "default", Seq: 1, TS: "2026-01-02T03:04:05.678Z", Run: "run-1", ID: "msg-1", Text: "hello", Digest: "sha256:ab"},
			`{"type":"user","session":"default","seq":1,"ts":"2026-01-02T03:04:05.678Z","run":"run-1","id":"msg-1","text":"hello","digest":"sha256:ab"}`},
		{Frame{Type: TypeToolResult, Session: "s", Seq: 7, TS: "t", Run: "run-1", CallID: "call-1", Name: "tsh", Status: "error", Content: "a\nb", Truncated: true},
			`{"type":"tool_result","session":"s","seq":7,"ts":"t","run":"run-1","call_id":"call-1","name":"tsh","status":"error","content":"a\nb","truncated":true}`},
		{Frame{Type: TypeApprovalRequest, Session: "s", Seq: 3, TS: "t", Run: "r", ID: "c", Name: "tsh", Args: []string{"load", "bash"}, TimeoutMS: 60000},
			`{"type":"approval_request","session":"s","seq":3,"ts":"t","run":"r","id":"c","name":"tsh","args":["load","bash"],"timeout_ms":60000}`},
		{Frame{Type: TypeError, Session: "s", Seq: 9, TS: "t", Run: "r", Code: CodeInterrupted, Message: "m"},
			`{"type":"error","session":"s","seq":9,"ts":"t","run":"r","code":"interrupted","message":"m"}`},
		{Frame{Type: TypeDone, Session: "s", Seq: 10, TS: "t", Run: "r", ID: "msg-1", Status: "ok", Replay: true},
			`{"type":"done","session":"s","seq":10,"ts":"t","run":"r","id":"msg-1","status":"ok","replay":true}`},
		// A transport error frame without a run carries no run field.
		{Frame{Type: TypeError, Code: CodeBadRequest, Message: "x"}, `{"type":"error","code":"bad_request","message":"x"}`},
		// Invalid UTF-8 in a string becomes U+FFFD (escaped as encoding/json writes it).
		{Frame{Type: TypeDelta, Run: "r", Text: "a\xffb"}, `{"type":"delta","run":"r","text":"a\ufffdb"}`},
	}
	for _, tc := range cases {
		got := tc.f.Line()
		if string(got) != tc.want+"\n" {
			t.Errorf("\n got %s\nwant %s", got, tc.want)
		}
		if strings.Count(string(got), "\n") != 1 {
			t.Errorf("frame is not one line: %q", got)
		}
	}
}

// TestFrameRoundTrip: what MarshalJSON writes, encoding/json reads back
// (the store parses events.jsonl this way).
func TestFrameRoundTrip(t *testing.T) {
	for _, in := range []Frame{
		{Type: TypeToolCall, Session: "s", Seq: 4, TS: "t", Run: "r", CallID: "c", Name: "tsh", Args: []string{"a", "<b>&"}},
		{Type: TypeDone, Session: "s", Seq: 9, Run: "r", ID: "q", Status: StatusOK, Usage: &Usage{Input: 250, Output: 15, CacheRead: 80}},
	} {
		var out Frame
		if err := json.Unmarshal(in.Line(), &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("\n got %+v\nwant %+v", out, in)
		}
	}
}

// TestIsTransport: pong, caught_up, ack and run-less bad_request/too_large/busy
// errors are never appended to events.jsonl. spec: P2 (interfaces.md)
func TestIsTransport(t *testing.T) {
	cases := []struct {
		f    Frame
		want bool
	}{
		{Frame{Type: TypePong}, true},
		{Frame{Type: TypeCaughtUp}, true},
		{Frame{Type: TypeAck}, true},
		{Frame{Type: TypeError, Code: CodeBadRequest}, true},
		{Frame{Type: TypeError, Code: CodeTooLarge}, true},
		{Frame{Type: TypeError, Code: CodeBusy}, true},
		{Frame{Type: TypeError, Code: CodeBusy, Run: "r"}, false},
		{Frame{Type: TypeError, Code: CodeInterrupted, Run: "r"}, false},
		{Frame{Type: TypeError, Code: CodeInternal}, false},
		{Frame{Type: TypeUser}, false},
		{Frame{Type: TypeDone}, false},
		{Frame{Type: TypeDelta}, false},
	}
	for _, tc := range cases {
		if got := tc.f.IsTransport(); got != tc.want {
			t.Errorf("%s/%s/%s: IsTransport = %v", tc.f.Type, tc.f.Code, tc.f.Run, got)
		}
	}
	for typ, want := range map[string]bool{TypeAssistant: true, TypeError: true, TypeCancelled: true, TypeDone: false, TypeDelta: false, TypeToolResult: false} {
		if got := (&Frame{Type: typ}).IsConclusion(); got != want {
			t.Errorf("%s: IsConclusion = %v", typ, got)
		}
	}
}

// TestMarkReplay: a replayed stored frame carries "replay":true once, and
// stays one JSON object per line. spec: P4
func TestMarkReplay(t *testing.T) {
	stored := (&Frame{Type: TypeDone, Session: "s", Seq: 5, TS: "t", Run: "r", ID: "m", Status: "ok"}).Line()
	want := `{"type":"done","session":"s","seq":5,"ts":"t","run":"r","id":"m","status":"ok","replay":true}` + "\n"
	for name, in := range map[string][]byte{"with newline": stored, "without newline": stored[:len(stored)-1]} {
		got := MarkReplay(in)
		if string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
		if string(MarkReplay(got)) != want {
			t.Errorf("%s: marking twice changed it: %s", name, MarkReplay(got))
		}
		var f Frame
		if err := json.Unmarshal(got, &f); err != nil || !f.Replay {
			t.Errorf("%s: %v %+v", name, err, f)
		}
	}
	before := string(stored)
	_ = MarkReplay(stored)
	if string(stored) != before {
		t.Fatal("MarkReplay modified the stored line (it is shared with other readers)")
	}
}
