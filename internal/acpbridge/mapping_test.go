package acpbridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/ipc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spec: prompt blocks become one send input; images and audio
// are refused (the initialize answer says image: false).
func TestPromptText(t *testing.T) {
	cases := []struct {
		name    string
		blocks  []acp.ContentBlock
		want    string
		wantErr bool
	}{
		{"text", []acp.ContentBlock{acp.TextBlock("hello")}, "hello", false},
		{"two texts", []acp.ContentBlock{acp.TextBlock("a"), acp.TextBlock("b")}, "a\nb", false},
		{"link", []acp.ContentBlock{acp.TextBlock("see"), acp.ResourceLinkBlock("f", "file:///w/f.go")}, "see\n@file:///w/f.go", false},
		{"embedded text", []acp.ContentBlock{acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///x", Text: "body"}})}, "@file:///x\nbody", false},
		{"image", []acp.ContentBlock{acp.ImageBlock("AAAA", "image/png")}, "", true},
		{"audio", []acp.ContentBlock{acp.AudioBlock("AAAA", "audio/wav")}, "", true},
		{"empty", nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PromptText(tc.blocks)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %q, %v", got, err)
			}
			if err != nil && !errors.Is(err, ErrUnsupportedContent) {
				t.Fatalf("error class: %v", err)
			}
		})
	}
}

// spec: P4 — the request id is a function of session and key,
// valid on the wire, and the editor's message id wins over the turn key.
func TestRequestID(t *testing.T) {
	p := acp.PromptRequest{SessionId: "s"}
	a := RequestID("s", PromptKey(p, 0, "hi"))
	if a != RequestID("s", PromptKey(p, 0, "hi")) {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{RequestID("s", PromptKey(p, 1, "hi")), RequestID("s", PromptKey(p, 0, "ho")), RequestID("t", PromptKey(p, 0, "hi"))} {
		if other == a {
			t.Fatal("collision")
		}
	}
	m := "m-1"
	pm := acp.PromptRequest{SessionId: "s", MessageId: &m}
	if RequestID("s", PromptKey(pm, 0, "x")) != RequestID("s", PromptKey(pm, 7, "y")) {
		t.Fatal("messageId must be the key")
	}
	pmeta := acp.PromptRequest{SessionId: "s", Meta: map[string]any{"ctx/requestId": "r1"}}
	if RequestID("s", PromptKey(pmeta, 0, "x")) != RequestID("s", PromptKey(pmeta, 3, "z")) {
		t.Fatal("_meta ctx/requestId must be the key")
	}
	if err := ipc.CheckID("request id", a); err != nil {
		t.Fatal(err)
	}
}

// spec: frames map to the ACP updates an editor shows.
func TestUpdates(t *testing.T) {
	kind := func(us []acp.SessionUpdate) string {
		var out []string
		for _, u := range us {
			b, _ := json.Marshal(u)
			var m struct {
				K      string `json:"sessionUpdate"`
				Status string `json:"status"`
			}
			_ = json.Unmarshal(b, &m)
			out = append(out, strings.TrimSuffix(m.K+":"+m.Status, ":"))
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		f       ipc.Frame
		history bool
		want    string
	}{
		{ipc.Frame{Type: ipc.TypeDelta, Text: "x"}, false, "agent_message_chunk"},
		{ipc.Frame{Type: ipc.TypeDelta, Text: ""}, false, ""},
		{ipc.Frame{Type: ipc.TypeUser, Text: "q"}, false, ""},
		{ipc.Frame{Type: ipc.TypeUser, Text: "q"}, true, "user_message_chunk"},
		{ipc.Frame{Type: ipc.TypeToolCall, CallID: "c", Name: "tsh", Args: []string{"call", "bash"}}, false, "tool_call:pending"},
		{ipc.Frame{Type: ipc.TypeApproval, ID: "c", Decision: "allow_once"}, false, "tool_call_update:in_progress"},
		{ipc.Frame{Type: ipc.TypeApproval, ID: "c", Decision: "deny"}, false, ""},
		{ipc.Frame{Type: ipc.TypeToolResult, CallID: "c", Status: "ok"}, false, "tool_call_update:completed"},
		{ipc.Frame{Type: ipc.TypeToolResult, CallID: "c", Status: "denied"}, false, "tool_call_update:failed"},
		{ipc.Frame{Type: ipc.TypeError, Run: "r", Code: "x"}, false, ""},
		{ipc.Frame{Type: ipc.TypeError, Run: "r", Code: "x"}, true, "agent_message_chunk"},
		{ipc.Frame{Type: ipc.TypeDone, Status: "ok"}, false, ""},
		{ipc.Frame{Type: ipc.TypeApprovalRequest}, false, ""},
	}
	for _, tc := range cases {
		if got := kind(Updates(&tc.f, tc.history)); got != tc.want {
			t.Errorf("%s history=%v: %q, want %q", tc.f.Line(), tc.history, got, tc.want)
		}
	}
}

// spec: the stop reason is mapped from done.
func TestConclude(t *testing.T) {
	cases := []struct {
		status, code string
		stop         acp.StopReason
		err          bool
	}{
		{"ok", "", acp.StopReasonEndTurn, false},
		{"cancelled", "", acp.StopReasonCancelled, false},
		{"error", ipc.CodeLimitExceeded, acp.StopReasonMaxTurnRequests, false},
		{"error", ipc.CodeDenied, acp.StopReasonRefusal, false},
		{"error", ipc.CodeInvalidAgentOutput, "", true},
		{"error", "", "", true},
	}
	for _, tc := range cases {
		var ef *ipc.Frame
		if tc.code != "" {
			ef = &ipc.Frame{Type: ipc.TypeError, Code: tc.code, Message: "m"}
		}
		o := Conclude(tc.status, ef)
		if o.Stop != tc.stop || (o.Err != nil) != tc.err {
			t.Errorf("%s/%s: %+v", tc.status, tc.code, o)
		}
	}
	if e := RequestError(ipc.CodeBadRequest, "m"); e.Code != -32602 {
		t.Errorf("bad_request → %d", e.Code)
	}
}

// spec: A3 — the permission answer maps to the approve decision;
// no answer is eof.
func TestDecision(t *testing.T) {
	sel := func(id string) acp.RequestPermissionResponse {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(id))}
	}
	if d := Decision(sel(OptionAllow), nil); d != ipc.DecisionAllowOnce {
		t.Error(d)
	}
	if d := Decision(sel(OptionReject), nil); d != ipc.DecisionDeny {
		t.Error(d)
	}
	if d := Decision(sel("something-else"), nil); d != ipc.DecisionDeny {
		t.Error(d)
	}
	if d := Decision(acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil); d != ipc.DecisionDeny {
		t.Error(d)
	}
	if d := Decision(acp.RequestPermissionResponse{}, errors.New("peer gone")); d != "eof" {
		t.Error(d)
	}
}

// spec: lines that are not one JSON object are answered, not dropped.
func TestMalformed(t *testing.T) {
	cases := []struct {
		line string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, 0},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, 0},
		{`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`, 0},
		{`{not json`, -32700},
		{`[1,2]`, -32600},
		{`42`, -32600},
		{`{"jsonrpc":"2.0"}`, -32600},
		{"\x00too-long", -32700},
	}
	for _, tc := range cases {
		if code, _ := Malformed([]byte(tc.line)); code != tc.code {
			t.Errorf("%q: %d, want %d", tc.line, code, tc.code)
		}
	}
}

// FuzzMalformed: the line judge never panics, and what it passes on is a
// JSON object the SDK can decode.
func FuzzMalformed(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"x"}`, `{`, `[]`, `null`, `{"method":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if code, _ := Malformed(line); code == 0 {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("passed %q: %v", line, err)
			}
		}
	})
}

// FuzzUpdates: any frame maps without panicking to updates that marshal.
func FuzzUpdates(f *testing.F) {
	f.Add(`{"type":"tool_call","call_id":"c","name":"tsh","args":["call","bash"]}`, true)
	f.Add(`{"type":"tool_result","call_id":"c","status":"ok","content":"x"}`, false)
	f.Add(`{"type":"delta","text":"hi"}`, false)
	f.Fuzz(func(t *testing.T, line string, history bool) {
		var fr ipc.Frame
		if json.Unmarshal([]byte(line), &fr) != nil {
			return
		}
		for _, u := range Updates(&fr, history) {
			if _, err := json.Marshal(u); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
		_ = Conclude(fr.Status, &fr)
	})
}
