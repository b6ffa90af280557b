package run

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/prompt"
	"github.com/cortexfs/ctx/internal/provider"
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

// addUsage adds token use a provider (or an agent) reported to the run's
// sum, and under model (provider/model) when it is known, so a price
// table can price it.
func (a *Actor) addUsage(model string, u *provider.Usage) {
	if a.usage == nil {
		a.usage = &provider.Usage{}
	}
	a.usage.Add(u)
	if model == "" {
		return
	}
	if a.usageBy == nil {
		a.usageBy = map[string]*provider.Usage{}
	}
	if a.usageBy[model] == nil {
		a.usageBy[model] = &provider.Usage{}
	}
	a.usageBy[model].Add(u)
}

// renderWarnings is what a render left out or cut, as warning texts.
func renderWarnings(res *prompt.Result) []string {
	var ws []string
	if n := res.HistoryOmitted; n > 0 {
		ws = append(ws, fmt.Sprintf("%d older history messages were left out of the prompt to fit the window (nothing was deleted)", n))
	}
	if n := res.TurnsOmitted; n > 0 {
		ws = append(ws, fmt.Sprintf("%d earlier model turns of this run (their tool calls and results) were left out of the prompt to fit the window (nothing was deleted)", n))
	}
	return append(ws, res.Warnings...)
}

// warn emits each warning once per run.
func (a *Actor) warn(c actor.Context, ws []string) {
	for _, w := range ws {
		if a.warned[w] {
			continue
		}
		a.warned[w] = true
		a.emit(c, &ipc.Frame{Type: ipc.TypeWarning, Message: w})
	}
}
