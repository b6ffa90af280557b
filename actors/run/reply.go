package run

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/ipc"
)

// reply collects a step's delta text for its assistant conclusion. It keeps
// at most ipc.MaxAssistantText bytes — the deltas carry all of it — so an
// agent streaming without end (an ACP agent may send 10,000 updates of
// megabytes each) does not grow the daemon.
type reply struct {
	b     strings.Builder
	total int
}

func (r *reply) WriteString(s string) {
	r.total += len(s)
	if room := ipc.MaxAssistantText + utf8.UTFMax - r.b.Len(); room > 0 {
		r.b.WriteString(s[:min(room, len(s))])
	}
}

func (r *reply) Reset() { r.b.Reset(); r.total = 0 }

// cutText returns the longest prefix of s of at most n bytes that ends on
// a rune boundary (at least one rune when s has one).
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		_, size := utf8.DecodeRuneInString(s)
		i = size
	}
	return s[:i]
}

// concludeReply concludes the run with its reply as the assistant text. A
// reply over ipc.MaxAssistantText keeps its first bytes there, with a
// warning saying so, so no frame outgrows what clients read; total is the
// reply's whole length when text holds only part of it.
func (a *Actor) concludeReply(c actor.Context, text string, total int) {
	total = max(total, len(text))
	if total > ipc.MaxAssistantText {
		text = cutText(text, ipc.MaxAssistantText)
		a.warn(c, []string{fmt.Sprintf("the reply is %d bytes: its assistant frame keeps the first %d (the delta frames carry all of it)", total, len(text))})
	}
	a.conclude(c, &ipc.Frame{Type: ipc.TypeAssistant, Text: text}, ipc.StatusOK)
}
