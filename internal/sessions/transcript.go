package sessions

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/prices"
	"github.com/cortexfs/ctx/ipc"
)

// Entry kinds of a transcript.
const (
	KindRun       = "run"       // a run begins: Run, TS, Op
	KindUser      = "user"      // the user's message: Text
	KindTool      = "tool"      // one tool call: Name, Args, Status, Approval, Result, Content
	KindAssistant = "assistant" // the final answer: Text
	KindError     = "error"     // Code, Text
	KindCancelled = "cancelled" // the run was cancelled
	KindWarning   = "warning"   // Text
	KindCandidate = "candidate" // a model candidate skipped: Name (model), Status, Text (reason)
	KindDone      = "done"      // Status, DurationMS, Usage
	KindOpen      = "open"      // the log ends inside this run: Status is the session state, Text what was streamed so far
	KindPartial   = "partial"   // what a cancelled or failed run streamed before it ended: Text
)

// Tool call statuses beyond the tool_result ones (ok error denied cancelled).
const (
	CallRunning  = "running"
	CallWaiting  = "waiting-approval"
	CallNoResult = "no-result" // its run ended without a result for it
)

// Entry is one item of a transcript (`ctx agent history --json` prints
// one per line).
type Entry struct {
	Kind string `json:"kind"`
	Run  string `json:"run,omitempty"`
	Seq  int64  `json:"seq,omitempty"`
	TS   string `json:"ts,omitempty"`
	Op   string `json:"op,omitempty"`
	Text string `json:"text,omitempty"`
	// Images are a user message's images, as references (never bytes).
	Images []ipc.Image `json:"images,omitempty"`
	CallID string      `json:"call_id,omitempty"`
	Name   string      `json:"name,omitempty"`
	Args   []string    `json:"args,omitempty"`
	Status string      `json:"status,omitempty"`
	// Approval is the decision when the call was asked about.
	Approval string `json:"approval,omitempty"`
	// Result is the tool result's first line, at most ResultRunes; Content
	// the whole normalized result (at most 16 KiB, as stored).
	Result     string           `json:"result,omitempty"`
	Content    string           `json:"content,omitempty"`
	Truncated  bool             `json:"truncated,omitempty"`
	Code       string           `json:"code,omitempty"`
	DurationMS int64            `json:"duration_ms,omitempty"`
	Usage      map[string]int64 `json:"usage,omitempty"`
	// UsageByModel is a done entry's usage per candidate that answered.
	UsageByModel map[string]map[string]int64 `json:"usage_by_model,omitempty"`
	// CostUSD is a done entry's cost, set by a client with a price table
	// when every model's usage is priced.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// ResultRunes bounds a tool call's short result.
const ResultRunes = 100

// maxPartial bounds the streamed text kept for a run still in progress.
const maxPartial = 64 << 10

// Transcript turns frames into entries as they are read: memory is bounded
// by one run's unanswered tool calls, never by the log's size.
type Transcript struct {
	Emit func(Entry)

	run     string
	started time.Time
	calls   []*Entry // the open run's calls without a result, in call order
	partial strings.Builder
}

func (t *Transcript) call(id string) *Entry {
	for _, c := range t.calls {
		if c.CallID == id {
			return c
		}
	}
	return nil
}

func (t *Transcript) flushCalls(status string) {
	for _, c := range t.calls {
		if status != "" {
			c.Status = status
		}
		t.Emit(*c)
	}
	t.calls = nil
}

// Frame feeds one stored frame.
func (t *Transcript) Frame(f *Frame) {
	e := Entry{Run: f.Run, Seq: f.Seq, TS: f.TS}
	if (f.Type == ipc.TypeUser || f.Type == ipc.TypeStart) && f.Run != "" && f.Run != t.run {
		t.flushCalls(CallNoResult)
		t.run, t.started = f.Run, time.Time{}
		t.partial.Reset()
		t.Emit(Entry{Kind: KindRun, Run: f.Run, Seq: f.Seq, TS: f.TS})
	}
	switch f.Type {
	case ipc.TypeUser:
		e.Kind, e.Text, e.Images = KindUser, f.Text, f.Images
		t.Emit(e)
	case ipc.TypeStart:
		t.started, _ = time.Parse(time.RFC3339Nano, f.TS)
	case ipc.TypeDelta:
		if t.partial.Len()+len(f.Text) <= maxPartial {
			t.partial.WriteString(f.Text)
		}
	case ipc.TypeToolCall:
		t.partial.Reset()
		e.Kind, e.CallID, e.Name, e.Args, e.Status = KindTool, f.CallID, f.Name, f.Args, CallRunning
		t.calls = append(t.calls, &e)
	case ipc.TypeApprovalRequest:
		if c := t.call(f.ID); c != nil {
			c.Status = CallWaiting
		}
	case ipc.TypeApproval:
		if c := t.call(f.ID); c != nil {
			c.Approval, c.Status = f.Decision, CallRunning
		}
	case ipc.TypeToolResult:
		c := t.call(f.CallID)
		if c == nil {
			e.Kind, e.CallID, e.Name = KindTool, f.CallID, f.Name
			c = &e
		} else {
			t.calls = removeCall(t.calls, c)
		}
		c.Status, c.Content, c.Truncated = f.Status, f.Content, f.Truncated
		c.Result = Short(f.Content)
		t.Emit(*c)
	case ipc.TypeAssistant:
		t.flushCalls(CallNoResult)
		t.partial.Reset()
		e.Kind, e.Text = KindAssistant, f.Text
		t.Emit(e)
	case ipc.TypeError:
		if f.Run == "" {
			return
		}
		t.flushCalls(CallNoResult)
		t.emitPartial(e)
		e.Kind, e.Code, e.Text = KindError, f.Code, f.Message
		t.Emit(e)
	case ipc.TypeCancelled:
		t.flushCalls(CallNoResult)
		t.emitPartial(e)
		e.Kind = KindCancelled
		t.Emit(e)
	case ipc.TypeWarning:
		e.Kind, e.Text = KindWarning, f.Message
		t.Emit(e)
	case ipc.TypeCandidate:
		e.Kind, e.Name, e.Status, e.Text = KindCandidate, f.Model, f.Status, f.Reason
		t.Emit(e)
	case ipc.TypeDone:
		t.flushCalls(CallNoResult)
		e.Kind, e.Status, e.Usage = KindDone, f.Status, f.Tokens()
		for m, u := range f.UsageByModel {
			if u != nil {
				if e.UsageByModel == nil {
					e.UsageByModel = map[string]map[string]int64{}
				}
				AddUsage(e.UsageByModel, m, u)
			}
		}
		if end, err := time.Parse(time.RFC3339Nano, f.TS); err == nil && !t.started.IsZero() && f.Run == t.run {
			e.DurationMS = end.Sub(t.started).Milliseconds()
		}
		t.Emit(e)
		if f.Run == t.run {
			t.run = ""
		}
		t.partial.Reset()
	}
}

// emitPartial keeps what a run streamed before it was cancelled or failed
// (no assistant frame will say it): the person saw it.
func (t *Transcript) emitPartial(e Entry) {
	if strings.TrimSpace(t.partial.String()) == "" {
		return
	}
	e.Kind, e.Text = KindPartial, t.partial.String()
	t.partial.Reset()
	t.Emit(e)
}

func removeCall(cs []*Entry, c *Entry) []*Entry {
	out := cs[:0]
	for _, x := range cs {
		if x != c {
			out = append(out, x)
		}
	}
	return out
}

// End closes the transcript: a run the log ends inside is shown with the
// session's state (running, waiting-approval or, with no daemon,
// interrupted) and what it streamed so far.
func (t *Transcript) End(daemonUp bool) {
	if t.run == "" {
		return
	}
	waiting := false
	for _, c := range t.calls {
		waiting = waiting || c.Status == CallWaiting
	}
	t.flushCalls("")
	t.Emit(Entry{Kind: KindOpen, Run: t.run, Status: StateOf(true, waiting, daemonUp), Text: t.partial.String()})
}

// Short is a tool result's first non-empty line, cut to ResultRunes.
func Short(content string) string {
	for _, line := range strings.Split(strings.TrimSpace(content), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return cut(Clean(line), ResultRunes)
		}
	}
	return ""
}

// cut shortens s to at most n runes, marking the cut with an ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return string(rs[:n-1]) + "…"
}

// Clean makes stored text safe to print on a terminal: control and format
// characters other than newline and tab (escape sequences, bidi
// overrides) become U+FFFD, so an agent's output cannot drive the
// reader's terminal; so does each byte that is not UTF-8 — a lone 0x9b
// is the one-byte CSI to a terminal that takes 8-bit controls, and a
// wrapper that re-encodes it bytewise makes U+009B of it.
func Clean(s string) string {
	ok := true
	for _, r := range s {
		if bad(r) || r == utf8.RuneError { // strings.Map writes U+FFFD for a bad byte
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	return strings.Map(func(r rune) rune {
		if bad(r) {
			return utf8.RuneError
		}
		return r
	}, s)
}

func bad(r rune) bool {
	return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
}

// TextWriter renders entries for a person, one block per run:
//
//	── 2025-01-02 15:04:05 · run-…
//	> what is in notes.txt?
//	  tool cat notes.txt → ok: first line of the result
//	The file holds …
//	  (ok · 1.2s · usage input=812 output=64)
type TextWriter struct {
	W io.Writer
	// Markdown renders an answer for a terminal (chatview); nil prints
	// it as written.
	Markdown func(string) string
	// Local formats timestamps (time.Local unless set).
	Loc *time.Location
	// Full prints each tool call's whole stored result below its line.
	Full bool
	err  error
}

// Err is the first write error.
func (w *TextWriter) Err() error { return w.err }

func (w *TextWriter) printf(format string, a ...any) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.W, format, a...)
	}
}

// Write renders one entry.
func (w *TextWriter) Write(e Entry) {
	switch e.Kind {
	case KindRun:
		w.printf("── %s · %s\n", w.when(e.TS), e.Run)
	case KindUser:
		w.printf("> %s\n", indent(Clean(e.Text), "  "))
		for _, im := range e.Images {
			w.printf("  %s\n", Clean(im.Line())) // a reference, never the bytes
		}
	case KindTool:
		status := e.Status
		if e.Approval != "" {
			status += " (approval: " + e.Approval + ")"
		}
		line := "  tool " + Clean(Command(e.Name, e.Args)) + " → " + status
		if e.Result != "" {
			line += ": " + e.Result
		}
		if e.Truncated {
			line += " [truncated]"
		}
		w.printf("%s\n", line)
		if c := strings.TrimRight(e.Content, "\n"); w.Full && c != "" {
			for _, l := range strings.Split(Clean(c), "\n") {
				w.printf("    │ %s\n", l)
			}
		}
	case KindAssistant:
		w.printf("%s\n", w.answer(e.Text))
	case KindPartial:
		w.printf("%s\n", w.answer(e.Text))
	case KindError:
		w.printf("  error %s: %s\n", e.Code, indent(Clean(e.Text), "    "))
	case KindCancelled:
		w.printf("  cancelled\n")
	case KindWarning:
		w.printf("  warning: %s\n", indent(Clean(e.Text), "    "))
	case KindCandidate:
		w.printf("  model %s %s: %s\n", Clean(e.Name), e.Status, Clean(e.Text))
	case KindDone:
		parts := []string{e.Status}
		if d := time.Duration(e.DurationMS) * time.Millisecond; d >= time.Second {
			parts = append(parts, d.Round(100*time.Millisecond).String())
		} else if d > 0 {
			parts = append(parts, d.String())
		}
		if u := UsageText(e.Usage); u != "" {
			parts = append(parts, "usage "+u)
		}
		if e.CostUSD != nil {
			parts = append(parts, prices.Format(*e.CostUSD))
		}
		w.printf("  (%s)\n", strings.Join(parts, " · "))
	case KindOpen:
		if e.Text != "" {
			w.printf("%s\n", strings.TrimRightFunc(Clean(e.Text), unicode.IsSpace))
		}
		switch e.Status {
		case StateInterrupted:
			w.printf("  (interrupted: no daemon is running; it concludes this run as interrupted when it next starts)\n")
		default:
			w.printf("  (%s …)\n", e.Status)
		}
	}
}

// answer is an answer's text as printed: rendered when Markdown is set.
func (w *TextWriter) answer(text string) string {
	if w.Markdown != nil {
		return w.Markdown(text) // the renderer cleans control characters itself
	}
	return strings.TrimRightFunc(Clean(text), unicode.IsSpace)
}

func (w *TextWriter) when(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	loc := w.Loc
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).Format("2006-01-02 15:04:05")
}

func indent(s, pre string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}

// Command shows a tool call as a shell-like line: arguments with spaces
// or quotes are quoted; the whole is cut to 80 runes.
func Command(name string, args []string) string {
	parts := []string{name}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return cut(strings.Join(parts, " "), 80)
}

// UsageText is a usage map as "k=v" pairs, sorted by key ("" for none).
func UsageText(u map[string]int64) string {
	if len(u) == 0 {
		return ""
	}
	keys := make([]string, 0, len(u))
	for k := range u {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", Clean(k), u[k])
	}
	return b.String()
}
