package prompt

import (
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/window"
)

// budgetTokens returns a window whose input budget is at least chars.
func budgetTokens(chars int) uint32 {
	n := uint32(chars / 3)
	for int(window.InputBudgetChars(n)) < chars {
		n++
	}
	return n
}

// TestToolContextOverBudgetKeepsPinnedK5: when the tool context must be cut
// for the window, unpinned tools go first, oldest first, and the pinned
// ones stay — even when they are the oldest loads, where a cut from the end
// (or eviction ignoring pins) would keep the wrong ones. The envelope's
// tool_context (Result.ToolContext) is that same rendering. spec: K5 W9
func TestToolContextOverBudgetKeepsPinnedK5(t *testing.T) {
	in, _ := fixture(t)
	var st toolctx.State
	st.Load(toolctx.Loaded{Name: "pinned-old", Description: "the pinned one", Path: "/ctx/tool/pinned-old", Pinned: true})
	for i := 0; i < 40; i++ {
		st.Load(toolctx.Loaded{Name: "tool" + strings.Repeat("x", i%7) + string(rune('a'+i%26)), Description: strings.Repeat("unpinned metadata ", 8), Path: "/ctx/tool/u"})
	}
	st.Load(toolctx.Loaded{Name: "newest", Description: "unpinned and newest", Path: "/ctx/tool/newest"})
	in.ToolState = &st
	full, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if full.ToolContext != toolctx.ContextText(st, toolctx.DefaultContextBudget) {
		t.Fatal("uncut, the tool context is what `tsh context` prints")
	}
	// A window that leaves room for about a third of the tool context.
	in.WindowTokens = budgetTokens(len(full.JSON()) - 2*len(full.ToolContext)/3)
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	checkCharged(t, r)
	if !strings.Contains(r.System, "- pinned-old (pinned): the pinned one") || !strings.Contains(r.ToolContext, "- pinned-old (pinned)") {
		t.Fatalf("the pinned tool was cut:\n%s", r.ToolContext)
	}
	if !strings.Contains(r.ToolContext, "- newest: unpinned and newest") || !strings.Contains(r.ToolContext, "unpinned evicted; still callable") {
		t.Fatalf("eviction is not oldest-unpinned-first:\n%s", r.ToolContext)
	}
	if strings.Contains(r.System, "tool context cut by ctx") {
		t.Fatal("the tool context was cut as text, not by eviction")
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "pinned kept") {
		t.Errorf("warnings %v", r.Warnings)
	}
	// Tighter and tighter: the rules are cut only once eviction has left
	// the pinned tool alone, and the pinned tool is still there then.
	src, err := Collect(in)
	if err != nil {
		t.Fatal(err)
	}
	for tok := in.WindowTokens; tok > 100; tok -= 10 {
		in.WindowTokens = tok
		r, err = src.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(r.System, "rules cut by ctx") || strings.Contains(strings.Join(r.Warnings, "\n"), "rules: left out") {
			if r.ToolContext != toolctx.ContextPinned(st) {
				t.Fatalf("rules cut while unpinned tools remain or the pinned one is gone:\n%s", r.ToolContext)
			}
			return
		}
	}
	t.Fatal("the rules were never cut")
}

// TestTurnsFitTheBudgetW8: every dispatch of a model run fits, not only the
// first: the run's own turns are charged; history goes first, then earlier
// turns, oldest first; the newest tool result is cut with a marker; never
// sent over the budget. spec: W8 W9
func TestTurnsFitTheBudgetW8(t *testing.T) {
	in, _ := fixture(t)
	in.ToolContext = ""
	in.History = nil
	first, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	in.WindowTokens = budgetTokens(len(first.JSON()) + 2200)
	in.History = []Message{{Role: "user", Content: strings.Repeat("old ", 100)}, {Role: "assistant", Content: strings.Repeat("reply ", 80)}}
	turn := func(id, result string) []Message {
		return []Message{
			{Role: "assistant", Content: "calling", CallID: id, Name: "tsh", Args: []string{"call", "cat", id}},
			{Role: "tool", Content: result, CallID: id, Name: "tsh"},
		}
	}
	in.Turns = [][]Message{turn("c1", strings.Repeat("a", 900)), turn("c2", strings.Repeat("b", 900))}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	checkCharged(t, r)
	if r.TurnsOmitted != 0 || r.HistoryOmitted != 2 {
		t.Fatalf("history must go before the run's own turns: turns omitted %d, history omitted %d", r.TurnsOmitted, r.HistoryOmitted)
	}
	msgs := r.Messages()
	if last := msgs[len(msgs)-1]; last.Role != "tool" || last.CallID != "c2" || last.Content != strings.Repeat("b", 900) {
		t.Fatalf("last message %+v", last)
	}
	// A 16,000-byte tool result: the earlier turn is left out, the newest
	// result cut with a visible marker, the array within the budget.
	in.Turns = append(in.Turns, turn("c3", strings.Repeat("z", 16000)))
	r, err = Build(in)
	if err != nil {
		t.Fatal(err)
	}
	checkCharged(t, r)
	if r.TurnsOmitted != 2 {
		t.Fatalf("turns omitted %d, want 2", r.TurnsOmitted)
	}
	msgs = r.Messages()
	last := msgs[len(msgs)-1]
	if last.CallID != "c3" || !strings.Contains(last.Content, "tool result cut by ctx to fit the context window") || len(last.Content) >= 16000 {
		t.Fatalf("newest result not cut visibly: %d bytes", len(last.Content))
	}
	if msgs[len(msgs)-2].CallID != "c3" || msgs[len(msgs)-3].Role != "user" {
		t.Fatalf("the call and its result must stay together after the input: %+v", msgs[len(msgs)-3:])
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "tool results: the latest cut") {
		t.Errorf("warnings %v", r.Warnings)
	}
	// Unknown window: no total is claimed; every turn is sent.
	in.WindowKnown = false
	r, err = Build(in)
	if err != nil || r.TurnsOmitted != 0 || len(r.Messages()) < 7 {
		t.Fatalf("unknown window: %v omitted %d", err, r.TurnsOmitted)
	}
}
