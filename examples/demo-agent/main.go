// Command demo-agent is a tiny sdk-envelope-v1 agent that needs no model or
// API key: asked about the time, it calls the clock tool through tsh and
// answers with the tool's result; otherwise it echoes.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cortexfs/ctx/internal/envelope"
)

func main() {
	in, err := io.ReadAll(io.LimitReader(os.Stdin, envelope.MaxEnvelope+1))
	if err != nil {
		fail(err)
	}
	step, _ := strconv.Atoi(os.Getenv("CTX_STEP"))
	env, err := envelope.Decode(in, os.Getenv("CTX_RUN"), step)
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	say := func(s string) { _ = out.Encode(map[string]string{"type": "delta", "text": s}) }
	asksTime := strings.Contains(strings.ToLower(env.Input), "time")
	switch {
	case env.Observation == nil && asksTime:
		say("Let me look at the clock. ")
		_ = out.Encode(map[string]any{"type": "tool_call", "id": "call-1", "name": "tsh", "args": []string{"call", "clock"}})
	case env.Observation != nil:
		o := env.Observation
		if o.Status != envelope.StatusOK {
			say(fmt.Sprintf("The clock tool did not answer (%s): %s", o.Status, strings.TrimSpace(o.Content)))
			return
		}
		say("It is " + strings.TrimSpace(o.Content) + " (UTC), according to the clock tool.")
	default:
		var hist []json.RawMessage
		_ = json.Unmarshal([]byte(env.HistoryMessages), &hist)
		say(fmt.Sprintf("You said %q. (I remember %d earlier messages in this session.) Ask me what time it is to see a tool call.", env.Input, len(hist)))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "demo-agent:", err)
	os.Exit(1)
}
