package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/cortexfs/ctx/internal/provider"
)

// replayServer answers request i with testdata file i (the last repeats).
func replayServer(files ...string) *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(files)-1)
		data, _ := os.ReadFile(filepath.Join("testdata", files[i]))
		for bytes.HasPrefix(data, []byte("# ")) { // drop the source header
			_, data, _ = bytes.Cut(data, []byte("\n"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(bytes.TrimPrefix(data, []byte("\n")))
	}))
}

// Example is the model turn loop of a run: dispatch, stream deltas, run the
// tool calls, feed their results back, stop at a turn without tool calls.
func Example() {
	srv := replayServer("anthropic_tool_use.sse", "anthropic_after_tool.sse")
	defer srv.Close()
	root, _ := os.MkdirTemp("", "ctx-example")
	defer os.RemoveAll(root)

	// The daemon's environment, passed in; nothing below reads os.Getenv.
	daemonEnv := map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": "sk-example"}
	cfg, err := provider.Load(root, os.Getuid(), func(k string) string { return daemonEnv[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := provider.NewDispatcher(cfg, provider.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.CloseIdleConnections()

	candidates := []string{"anthropic/claude-sonnet-4-5"} // agent/<name>.d/model
	usable := func(model string) (bool, string) { return true, "" }
	runTool := func(args []string) (string, bool) { return "bash\ngit\n", false } // the tool actor
	req := provider.Request{
		System:   "Your only native callable tool is tsh.",
		Messages: []provider.Message{{Role: provider.RoleUser, Text: "Which tools do I have?"}},
		Tools:    []provider.Tool{provider.TSH()},
	}
	for calls := 0; ; {
		var text strings.Builder
		var toolCalls []provider.Event
		_, err := d.Dispatch(context.Background(), candidates, provider.Fixed(req, usable),
			func(ev provider.Event) error {
				switch ev.Kind {
				case provider.EventDelta:
					text.WriteString(ev.Text)
					fmt.Printf("delta %q\n", ev.Text)
				case provider.EventToolCall:
					toolCalls = append(toolCalls, ev)
					fmt.Printf("tool_call %s %q\n", ev.Name, ev.Args)
				}
				return nil
			},
			func(model, status, reason string) { fmt.Println("candidate", model, status, reason) })
		if err != nil {
			fmt.Println("error", err)
			return
		}
		if len(toolCalls) == 0 {
			fmt.Printf("assistant %q\n", text.String())
			return
		}
		// The turn is history: its text and calls, then one result per call.
		for i, c := range toolCalls {
			m := provider.Message{Role: provider.RoleAssistant, ToolCallID: c.CallID, ToolName: c.Name, ToolArgs: c.Args}
			if i == 0 {
				m.Text = text.String()
			}
			req.Messages = append(req.Messages, m)
		}
		for _, c := range toolCalls {
			calls++
			out, failed := "at most 8 tool calls per run", true // spec: X6
			if c.ArgsError != "" {
				out = c.ArgsError
			} else if calls <= 8 {
				out, failed = runTool(c.Args)
			}
			fmt.Printf("tool_result %q\n", out)
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: c.CallID, ToolName: c.Name, Text: out, IsError: failed})
		}
	}
	// Output:
	// delta "Let me list the tools."
	// tool_call tsh ["list"]
	// tool_result "bash\ngit\n"
	// delta "You have bash and git."
	// assistant "You have bash and git."
}
