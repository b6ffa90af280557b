// Command fixer-agent is a scripted sdk-envelope-v1 agent for `make demo`:
// no model and no API key, yet it does real work through the
// real runtime. Asked to fix the failing test in its workspace, it runs the
// test with the standard `bash` tool, finds the function with `grep`, reads
// the file with `read`, fixes it with `edit`, and runs the test again — each
// step one tool call through tsh, checked by every authority layer and run
// in the sandbox. Each step reads the previous step's result and stops,
// saying why, when a result is not what the script expects.
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

// step is one scripted tool call: what the agent says, the tsh args, and
// what the previous result must contain for the script to go on.
type step struct {
	say    string
	args   []string
	expect string // in the previous result ("" = anything ok)
	status string // the previous result's status
}

// The bug the demo repository carries: add() subtracts.
var script = []step{
	{say: "Let me run the tests first.\n", args: []string{"call", "bash", "sh test.sh"}},
	{say: "The test fails: add 2 3 does not give 5. Where is add defined?\n",
		args: []string{"call", "grep", `^add\(\)`}, expect: "FAIL", status: envelope.StatusError},
	{say: "It is in calc.sh. Reading it.\n", args: []string{"call", "read", "calc.sh"}, expect: "calc.sh:", status: envelope.StatusOK},
	{say: "add() subtracts its arguments. Fixing the operator.\n",
		args: []string{"call", "edit", "calc.sh", "$(( $1 - $2 ))", "$(( $1 + $2 ))"}, expect: "$(( $1 - $2 ))", status: envelope.StatusOK},
	{say: "Running the tests again.\n", args: []string{"call", "bash", "sh test.sh"}, status: envelope.StatusOK},
}

func main() {
	in, err := io.ReadAll(io.LimitReader(os.Stdin, envelope.MaxEnvelope+1))
	if err != nil {
		fail(err)
	}
	n, _ := strconv.Atoi(os.Getenv("CTX_STEP"))
	env, err := envelope.Decode(in, os.Getenv("CTX_RUN"), n)
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	say := func(s string) { _ = out.Encode(map[string]string{"type": "delta", "text": s}) }
	if !strings.Contains(strings.ToLower(env.Input), "fix") {
		say("I am the scripted fixer of `make demo`: ask me to fix the failing test in this directory.")
		return
	}
	i := env.Step // step 0 has no observation; step k sees the result of call k-1
	if o := env.Observation; o != nil && i < len(script) {
		s := script[i]
		if (s.status != "" && o.Status != s.status) || !strings.Contains(o.Content, s.expect) {
			say(fmt.Sprintf("That result (%s) is not what I expected, so I stop here:\n%s", o.Status, o.Content))
			return
		}
	}
	if i < len(script) {
		say(script[i].say)
		_ = out.Encode(map[string]any{"type": "tool_call", "id": "call-" + strconv.Itoa(env.Step+1), "name": "tsh", "args": script[i].args})
		return
	}
	o := env.Observation
	if o == nil || o.Status != envelope.StatusOK {
		say("The test still fails; I stop here.")
		return
	}
	say("Fixed: add() in calc.sh subtracted instead of adding. The test passes now:\n" + o.Content)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fixer-agent:", err)
	os.Exit(1)
}
