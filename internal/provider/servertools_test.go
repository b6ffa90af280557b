package provider

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/provider/sse"
)

// sseData returns the data payloads of a recorded stream, in order.
func sseData(t testing.TB, name string) []string {
	t.Helper()
	r := sse.NewReader(strings.NewReader(string(transcript(t, name))), 1<<20)
	var out []string
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		out = append(out, ev.Data)
	}
}

// A message with server tools (the provider's own web_search, web_fetch,
// bash_code_execution), thinking and citations parses; the server tools are
// reported and never become ctx tool calls; the blocks come back for replay.
func TestAnthropicServerToolsRecorded(t *testing.T) {
	d := &anthropicDecoder{name: "anthropic"}
	evs, done, err := decodeAll(d.event, sseData(t, "anthropic_server_tools.sse"))
	if err != nil || !done {
		t.Fatalf("done %v err %v", done, err)
	}
	var calls []Event
	var text strings.Builder
	for _, ev := range evs {
		switch ev.Kind {
		case EventToolCall:
			calls = append(calls, ev)
		case EventDelta:
			text.WriteString(ev.Text)
		}
	}
	if len(calls) != 1 || calls[0].Name != "tsh" || !reflect.DeepEqual(calls[0].Args, []string{"list"}) {
		t.Fatalf("ctx tool calls %+v, want the one tsh call", calls)
	}
	if text.String() != "Go 1.23 added range-over-func iterators." {
		t.Fatalf("text %q", text.String())
	}
	end := evs[len(evs)-1]
	if end.Kind != EventDone || end.StopReason != "tool_use" {
		t.Fatalf("end %+v", end)
	}
	want := []ServerTool{
		{ID: "srvtoolu_014hJH82Qum7Td6UV8gDXThB", Name: "web_search", Input: `{"query": "go 1.23 release notes"}`},
		{ID: "srvtoolu_01FetchA", Name: "web_fetch", Input: `{"url":"https://go.dev/doc/go1.23"}`},
		{ID: "srvtoolu_01Bash", Name: "bash_code_execution", Input: `{"command":"echo hi"}`},
	}
	if !reflect.DeepEqual(end.ServerTools, want) {
		t.Fatalf("server tools %+v\nwant %+v", end.ServerTools, want)
	}
	var blocks []map[string]any
	if err := json.Unmarshal(end.Content, &blocks); err != nil {
		t.Fatalf("content %s: %v", end.Content, err)
	}
	var types []string
	for _, b := range blocks {
		types = append(types, b["type"].(string))
	}
	wantTypes := []string{"thinking", "server_tool_use", "web_search_tool_result", "text", "server_tool_use",
		"web_fetch_tool_result", "server_tool_use", "bash_code_execution_tool_result"}
	if !reflect.DeepEqual(types, wantTypes) {
		t.Fatalf("replayed block types %v, want %v (ctx's tool_use is sent from its own message)", types, wantTypes)
	}
	if blocks[0]["thinking"] != "I should search first." || !strings.HasPrefix(blocks[0]["signature"].(string), "EqQB") {
		t.Fatalf("thinking block %v", blocks[0])
	}
	if in := blocks[1]["input"].(map[string]any); in["query"] != "go 1.23 release notes" {
		t.Fatalf("server_tool_use input %v", blocks[1])
	}
	if blocks[2]["tool_use_id"] != "srvtoolu_014hJH82Qum7Td6UV8gDXThB" || blocks[2]["content"].([]any)[0].(map[string]any)["encrypted_content"] == nil {
		t.Fatalf("web search result not verbatim: %v", blocks[2])
	}
	if cit := blocks[3]["citations"].([]any); len(cit) != 1 || cit[0].(map[string]any)["type"] != "web_search_result_location" ||
		blocks[3]["text"] != "Go 1.23 added range-over-func iterators." {
		t.Fatalf("cited text block %v", blocks[3])
	}
}

// Unknown event, block and delta types are skipped, redacted_thinking is
// kept verbatim, pause_turn is reported as the stop reason.
func TestAnthropicUnknownTypesAndPauseTurn(t *testing.T) {
	d := &anthropicDecoder{name: "anthropic"}
	evs, done, err := decodeAll(d.event, sseData(t, "anthropic_pause_turn.sse"))
	if err != nil || !done {
		t.Fatalf("done %v err %v", done, err)
	}
	if len(evs) != 1 || evs[0].Kind != EventDone || evs[0].StopReason != "pause_turn" {
		t.Fatalf("events %+v", evs)
	}
	var blocks []map[string]any
	if err := json.Unmarshal(evs[0].Content, &blocks); err != nil || len(blocks) != 3 {
		t.Fatalf("content %s: %v", evs[0].Content, err)
	}
	if blocks[0]["type"] != "redacted_thinking" || blocks[0]["data"] != "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP" {
		t.Fatalf("redacted_thinking not verbatim: %v", blocks[0])
	}
	if blocks[2]["type"] != "future_block_kind" {
		t.Fatalf("unknown block not kept: %v", blocks[2])
	}
}

// Table: each delta type in the block it belongs to; which Content comes back.
func TestAnthropicBlockKinds(t *testing.T) {
	start := func(i int, blk string) string {
		return `{"type":"content_block_start","index":` + string(rune('0'+i)) + `,"content_block":` + blk + `}`
	}
	delta := func(i int, d string) string {
		return `{"type":"content_block_delta","index":` + string(rune('0'+i)) + `,"delta":` + d + `}`
	}
	stop := func(i int) string { return `{"type":"content_block_stop","index":` + string(rune('0'+i)) + `}` }
	const msgStop = `{"type":"message_stop"}`
	tests := []struct {
		name     string
		payloads []string
		content  string // the Content JSON expected; "" for nil
		servers  int
		err      error
	}{
		{"text only: no content to replay", []string{start(0, `{"type":"text","text":""}`), delta(0, `{"type":"text_delta","text":"a"}`), stop(0), msgStop}, "", 0, nil},
		{"thinking with signature", []string{start(0, `{"type":"thinking","thinking":""}`), delta(0, `{"type":"thinking_delta","thinking":"x"}`),
			delta(0, `{"type":"signature_delta","signature":"s"}`), stop(0), msgStop}, `[{"signature":"s","thinking":"x","type":"thinking"}]`, 0, nil},
		{"server tool use streams input", []string{start(0, `{"type":"server_tool_use","id":"srv1","name":"web_search","input":{}}`),
			delta(0, `{"type":"input_json_delta","partial_json":"{\"query\":"}`), delta(0, `{"type":"input_json_delta","partial_json":"\"q\"}"}`), stop(0), msgStop},
			`[{"id":"srv1","input":{"query":"q"},"name":"web_search","type":"server_tool_use"}]`, 1, nil},
		{"server tool input cut off: block left out of the replay", []string{start(0, `{"type":"server_tool_use","id":"srv1","name":"web_search","input":{}}`),
			delta(0, `{"type":"input_json_delta","partial_json":"{\"query\":"}`), msgStop}, `[]`, 1, nil},
		{"citation on text", []string{start(0, `{"type":"text","text":""}`), delta(0, `{"type":"citations_delta","citation":{"type":"char_location","cited_text":"c"}}`),
			delta(0, `{"type":"text_delta","text":"t"}`), stop(0), msgStop}, `[{"citations":[{"type":"char_location","cited_text":"c"}],"text":"t","type":"text"}]`, 0, nil},
		{"tool_use is not replayed in Content", []string{start(0, `{"type":"redacted_thinking","data":"d"}`), stop(0),
			start(1, `{"type":"tool_use","id":"t1","name":"tsh","input":{}}`), delta(1, `{"type":"input_json_delta","partial_json":"{\"args\":[]}"}`), stop(1), msgStop},
			`[{"data":"d","type":"redacted_thinking"}]`, 0, nil},
		{"unknown delta in a text block skipped", []string{start(0, `{"type":"text","text":""}`), delta(0, `{"type":"future_delta","x":1}`), stop(0), msgStop}, "", 0, nil},
		{"text_delta in a server tool block is malformed", []string{start(0, `{"type":"server_tool_use","id":"s","name":"web_search"}`),
			delta(0, `{"type":"text_delta","text":"x"}`)}, "", 0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &anthropicDecoder{name: "anthropic"}
			evs, _, err := decodeAll(d.event, tt.payloads)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if tt.err != nil {
				return
			}
			end := evs[len(evs)-1]
			if string(end.Content) != tt.content || len(end.ServerTools) != tt.servers {
				t.Fatalf("content %s servers %+v, want %s and %d", end.Content, end.ServerTools, tt.content, tt.servers)
			}
		})
	}
}

// The next request replays the server tool blocks verbatim in the
// assistant message, ahead of ctx's own tool_use, and the API's required
// order (server_tool_use then its result) holds.
func TestAnthropicServerToolsReplayed(t *testing.T) {
	srv := newServer(t, replay(t, "anthropic_server_tools.sse"), replay(t, "anthropic_after_tool.sse"))
	p := newProvider(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey))
	ctx := ctxTimeout(t, 10*time.Second)
	req := userTurn("what is new in go 1.23?")
	var rec recorder
	if err := p.Stream(ctx, req, rec.emit); err != nil {
		t.Fatal(err)
	}
	evs := rec.all()
	end := evs[len(evs)-1]
	var call Event
	for _, ev := range evs {
		if ev.Kind == EventToolCall {
			call = ev
		}
	}
	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, Text: rec.text(), Content: end.Content, ToolCallID: call.CallID, ToolName: call.Name, ToolArgs: call.Args},
		Message{Role: RoleTool, ToolCallID: call.CallID, ToolName: call.Name, Text: "bash\n"})
	var rec2 recorder
	if err := p.Stream(ctx, req, rec2.emit); err != nil {
		t.Fatal(err)
	}
	asst := get(t, srv.body(t, 1), "messages", 1)
	content := asst.(map[string]any)["content"].([]any)
	var types []string
	for _, b := range content {
		types = append(types, b.(map[string]any)["type"].(string))
	}
	want := []string{"thinking", "server_tool_use", "web_search_tool_result", "text", "server_tool_use",
		"web_fetch_tool_result", "server_tool_use", "bash_code_execution_tool_result", "tool_use"}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("assistant content %v, want %v", types, want)
	}
	if get(t, asst, "content", 8, "id") != "toolu_01Tsh" || get(t, asst, "content", 2, "tool_use_id") != "srvtoolu_014hJH82Qum7Td6UV8gDXThB" {
		t.Fatalf("assistant message %v", asst)
	}
	if get(t, asst, "content", 2, "content", 0, "encrypted_content") != "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y" {
		t.Fatalf("search result not replayed verbatim: %v", get(t, asst, "content", 2))
	}
}

// FuzzAnthropicDecoder feeds arbitrary event data, seeded with every
// recorded Anthropic stream: the decoder never panics, and a Content it
// returns is always a JSON array.
func FuzzAnthropicDecoder(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "anthropic_*.sse"))
	for _, name := range files {
		for _, d := range sseData(f, filepath.Base(name)) {
			f.Add(d, d)
		}
	}
	f.Add(`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		d := &anthropicDecoder{name: "anthropic"}
		for _, p := range []string{a, b, `{"type":"message_stop"}`} {
			done, err := d.event(p, func(ev Event) error {
				if ev.Content != nil {
					var arr []json.RawMessage
					if json.Unmarshal(ev.Content, &arr) != nil {
						t.Fatalf("content not a JSON array: %s", ev.Content)
					}
				}
				return nil
			})
			if err != nil || done {
				return
			}
		}
	})
}

// What one reply keeps for replay is bounded: past 8 MiB the stream is
// refused as malformed instead of growing without end.
func TestAnthropicKeptContentBounded(t *testing.T) {
	d := &anthropicDecoder{name: "anthropic"}
	piece, _ := json.Marshal(strings.Repeat("x", 1<<20))
	payloads := []string{`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`}
	for i := 0; i < 9; i++ {
		payloads = append(payloads, `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`+string(piece)+`}}`)
	}
	if _, _, err := decodeAll(d.event, payloads); !errors.Is(err, ErrMalformed) {
		t.Fatalf("9 MiB of thinking kept: %v", err)
	}
	d = &anthropicDecoder{name: "anthropic"}
	if _, _, err := decodeAll(d.event, payloads[:8]); err != nil {
		t.Fatalf("7 MiB refused: %v", err)
	}
}
