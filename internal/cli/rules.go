package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/cortexfs/ctx/internal/chatview"
	"github.com/cortexfs/ctx/ipc"
)

// callRules are the calls a person allowed with a at a question: the
// same call — the same tool with the same argv (for bash, the same
// command), or the same MCP server, tool and arguments — is answered
// allow_once by this client whenever it is asked again, in the same
// session, for as long as the client runs (a chat until it leaves or
// changes session; a send until its run ends). The daemon is unchanged by
// a rule: it still asks, and only the allow_once this client sends runs
// that one call (A3); each such answer is printed and recorded as an
// approval frame, like any other.
type callRules map[string]bool

// ruleKey is what a rule matches: the session and the exact call.
func ruleKey(session string, f *ipc.Frame) string {
	if m := f.MCP; m != nil {
		return session + "\x00mcp\x00" + m.Server + "\x00" + m.Tool + "\x00" + string(m.Arguments)
	}
	return session + "\x00" + f.Name + "\x00" + strings.Join(f.Args, "\x00")
}

// add allows f's call again in session.
func (r callRules) add(session string, f *ipc.Frame) { r[ruleKey(session, f)] = true }

// answers reports whether a rule allows f's call; if so it says so on t.
func (r callRules) answers(t io.Writer, session string, f *ipc.Frame) bool {
	if r == nil || f.Replay || !r[ruleKey(session, f)] { // a replayed request was asked of another connection
		return false
	}
	fmt.Fprintf(t, "  ✓ allowed once by your rule (a): %s\n", callLabel(f))
	return true
}

// callLabel names a call for people: the tool and its argv.
func callLabel(f *ipc.Frame) string {
	if m := f.MCP; m != nil {
		return chatview.Label(m.Server+"."+m.Tool, []string{string(m.Arguments)})
	}
	return chatview.Label(f.Name, f.Args)
}
