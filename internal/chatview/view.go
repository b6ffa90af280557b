// Package chatview renders a run's frames for a person at a terminal:
// the assistant's Markdown rendered (markdown.go), each tool
// call as one live line that ends with its status and duration, the time
// spent waiting for the model, and the diff an approval is about.
//
// Streaming: Markdown cannot be rendered a token at a time (a `**` or a
// fence changes what came before it), and rewriting many lines of a
// terminal that has scrolled is not reliable. So the view renders each
// block as soon as it is closed (a blank line outside a code fence, a
// fence's closing line, a heading line; see Blocks) and shows the block
// still open as it grows: whenever its text has no construct left open (an
// even count of backticks and of ** and __, no [ without its ]), the block
// so far is rendered and its lines but the last — wrapped to the width,
// so a long paragraph scrolls by as it streams — are printed and never
// again; the last, still growing, is the live line beside the spinner.
// When the block closes, the lines of its rendering not yet printed are.
// The live line is the only text ever rewritten, and it is one row, so it
// can always be erased. The open block is closed when the model calls a
// tool or the answer ends.
//
// A View is not safe for concurrent use: one goroutine feeds it frames and
// ticks (the client's frame loop).
package chatview

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/cortexfs/ctx/internal/sessions"
	"github.com/cortexfs/ctx/ipc"
)

// Options configure a View.
type Options struct {
	// Width is the terminal's width in columns (80 when 0).
	Width int
	// CRLF writes "\r\n" for "\n": the terminal is in raw mode (chat).
	CRLF bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Cost says what a done frame's usage cost ("$0.0123"), or "" when
	// it cannot be told (no price table, no price for the model, no
	// usage). Nil: cost is never shown.
	Cost func(done *ipc.Frame) string
}

// queuedAfter is how long a send may go without its user frame before the
// live line says it is queued (an idle session records it at once).
const queuedAfter = 500 * time.Millisecond

// TickEvery is how often the live line should be redrawn (Tick).
const TickEvery = 100 * time.Millisecond

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// sgrStyle is one SGR style: the codes that turn it on and off. The
// terminal's 16 colours only, so its own palette (light or dark) decides
// the shades — and no styling library's start-up on every ctx command.
type sgrStyle struct{ on, off string }

// Render styles s (one line).
func (st sgrStyle) Render(s string) string {
	if s == "" {
		return ""
	}
	return "\x1b[" + st.on + "m" + s + "\x1b[" + st.off + "m"
}

var (
	styleOK     = sgrStyle{"32", "39"}
	styleErr    = sgrStyle{"31", "39"}
	styleDenied = sgrStyle{"33", "39"}
	styleFaint  = sgrStyle{"2", "22"}
	styleSpin   = sgrStyle{"36", "39"}
	styleBold   = sgrStyle{"1", "22"}
)

// View renders one conversation's runs.
type View struct {
	w      io.Writer
	o      Options
	md     *Markdown
	blocks Blocks

	begun      time.Time // the run began (Begin)
	last       time.Time // the last frame that showed progress
	gotToken   bool      // a delta arrived in this run
	started    bool      // the run's user or start frame arrived
	text       bool      // this run printed assistant text
	shown      int       // rendered lines of the open block already printed
	candidates int       // candidate frames shown in this run
	tool       *running  // the call in flight
	live       bool      // the live line is on screen
	active     bool      // between Begin and done
	spin       int
	err        error
}

type running struct {
	label   string
	started time.Time
}

// New makes a View writing to w.
func New(w io.Writer, o Options) (*View, error) {
	if o.Width <= 0 {
		o.Width = 80
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	md, err := NewMarkdown(o.Width)
	if err != nil {
		return nil, err
	}
	return &View{w: w, o: o, md: md}, nil
}

// Err is the first write error.
func (v *View) Err() error { return v.err }

// Begin starts a run: the live line counts the wait for the first token.
func (v *View) Begin() {
	now := v.o.Now()
	v.begun, v.last = now, now
	v.gotToken, v.text, v.tool, v.active = false, false, nil, true
	v.blocks, v.shown, v.candidates, v.started = Blocks{}, 0, 0, false
	v.drawLive()
}

// Tick advances the spinner and the elapsed time on the live line.
func (v *View) Tick() {
	v.spin++
	if v.active {
		v.drawLive()
	}
}

// Pause takes the live line off the screen (before a question is asked);
// the next frame or Tick draws it again.
func (v *View) Pause() { v.clearLive() }

// Frame renders one frame of the run.
func (v *View) Frame(f *ipc.Frame) {
	now := v.o.Now()
	if !v.active && (f.Type == ipc.TypeUser || f.Type == ipc.TypeStart) {
		v.Begin()
	}
	if f.Type == ipc.TypeUser || f.Type == ipc.TypeStart {
		v.started = true
	}
	switch f.Type {
	case ipc.TypeUser:
		// The message's words are on the screen as typed; its images
		// are shown as their references, never their bytes.
		for _, im := range f.Images {
			v.println(styleFaint.Render("  " + sessions.Clean(im.Line())))
		}
	case ipc.TypeDelta:
		v.gotToken, v.last = true, now
		for _, b := range v.blocks.Write(f.Text) {
			v.printBlock(b)
		}
		v.printSettled()
	case ipc.TypeToolCall:
		v.flushText()
		v.tool = &running{label: Label(f.Name, f.Args), started: now}
	case ipc.TypeApproval:
		if v.tool != nil {
			v.tool.started = now // the duration is the call's, not the person's
		}
	case ipc.TypeToolResult:
		label := Label(f.Name, nil)
		var d time.Duration
		if v.tool != nil {
			label, d = v.tool.label, now.Sub(v.tool.started)
		}
		v.tool, v.last = nil, now
		v.println(colorToolLine(ToolLine(f.Status, label, f.Layer, f.Content, d), f.Status))
		if f.Status == "error" {
			for _, l := range Tail(f.Content, TailLines) {
				v.println(styleFaint.Render("  │ " + cutRunes(l, max(v.o.Width-6, 20))))
			}
		}
	case ipc.TypeAssistant:
		v.flushText()
		if !v.text && strings.TrimSpace(f.Text) != "" {
			v.printBlock(f.Text)
		}
	case ipc.TypeWarning:
		v.printNote(styleDenied.Render("! "), styleFaint, sessions.Clean(f.Message))
	case ipc.TypeCandidate:
		v.candidates++
		v.printNote(styleFaint.Render("↷ "), styleFaint, fmt.Sprintf("model %s %s: %s", sessions.Clean(f.Model), f.Status, sessions.Clean(f.Reason)))
	case ipc.TypeError:
		v.flushText()
		msg := sessions.Clean(f.Message)
		if f.Code == ipc.CodeModelUnavailable && v.candidates > 0 {
			// Each candidate's failure is on its ↷ line above: the
			// error that joins them all would say it all twice.
			msg = "no model candidate answered (each one's reason is above)"
		}
		v.printNote(styleErr.Render("✗ "), styleErr, fmt.Sprintf("error %s: %s", f.Code, msg))
	case ipc.TypeCancelled:
		v.flushText()
		v.println(styleFaint.Render("(cancelled)"))
	case ipc.TypeDone:
		v.flushText()
		v.println(styleFaint.Render(v.status(f, now)))
		v.active, v.tool = false, nil
		return
	}
	if v.active {
		v.drawLive()
	}
}

// status is the line that closes a run: its status, duration, usage and,
// with a price for it, cost.
func (v *View) status(f *ipc.Frame, now time.Time) string {
	parts := []string{f.Status}
	if !v.begun.IsZero() {
		parts = append(parts, Duration(now.Sub(v.begun)))
	}
	if u := f.Usage; u != nil {
		s := fmt.Sprintf("%s in · %s out", tokens(u.Input), tokens(u.Output))
		if u.CacheRead > 0 {
			s += " · " + tokens(u.CacheRead) + " cache read"
		}
		if u.CacheWrite > 0 {
			s += " · " + tokens(u.CacheWrite) + " cache write"
		}
		parts = append(parts, s)
	}
	if v.o.Cost != nil {
		if c := v.o.Cost(f); c != "" {
			parts = append(parts, c)
		}
	}
	return "── " + strings.Join(parts, " · ")
}

func tokens(n int64) string { return strconv.FormatInt(n, 10) }

func (v *View) flushText() {
	if b := v.blocks.Flush(); b != "" {
		v.printBlock(b)
	}
}

// printBlock prints a closed block: the lines of its rendering not
// printed while it was open (printSettled).
func (v *View) printBlock(md string) {
	out := v.md.Render(md)
	shown := v.shown
	v.shown = 0
	if out == "" {
		return
	}
	if shown > 0 {
		lines := strings.Split(out, "\n")
		if shown < len(lines) {
			v.println(strings.Join(lines[shown:], "\n"))
		}
		return
	}
	if v.text {
		out = "\n" + out
	}
	v.text = true
	v.println(out)
}

// printSettled prints the open block's rendered lines but the last, when
// its text has nothing left open that could change them.
func (v *View) printSettled() {
	p := v.blocks.Pending()
	if strings.TrimSpace(p) == "" || !settled(p) {
		return
	}
	lines := strings.Split(v.md.Render(p), "\n")
	if len(lines)-1 <= v.shown {
		return
	}
	out := strings.Join(lines[v.shown:len(lines)-1], "\n")
	if v.shown == 0 && v.text {
		out = "\n" + out
	}
	v.text = true
	v.shown = len(lines) - 1
	v.println(out)
}

// settled says whether an open block's text has no inline construct
// left open — whose closing would change how the lines before render. A
// fenced block is literal: its lines are settled as they come.
func settled(p string) bool {
	if fenceOf(strings.TrimLeft(p, "\n")) != "" {
		return true
	}
	return strings.Count(p, "`")%2 == 0 && strings.Count(p, "**")%2 == 0 &&
		strings.Count(p, "__")%2 == 0 && strings.Count(p, "[") == strings.Count(p, "]") &&
		strings.Count(p, "<") == strings.Count(p, ">")
}

// printNote prints a notice — a warning, a skipped candidate, an error —
// wrapped at word boundaries to the terminal (never cut mid-word by it),
// the lines after the first indented under the text.
func (v *View) printNote(mark string, st sgrStyle, text string) {
	lines := strings.Split(ansi.Wrap(text, max(v.o.Width-3, 20), ""), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = mark + st.Render(l)
		} else {
			lines[i] = "  " + st.Render(l)
		}
	}
	v.println(strings.Join(lines, "\n"))
}

// println writes text and a newline above the live line.
func (v *View) println(s string) {
	v.clearLive()
	v.write(s + "\n")
}

func (v *View) write(s string) {
	if v.err != nil {
		return
	}
	if v.o.CRLF {
		s = strings.ReplaceAll(s, "\n", "\r\n")
	}
	_, v.err = io.WriteString(v.w, s)
}

func (v *View) clearLive() {
	if v.live {
		v.write("\r\x1b[K")
		v.live = false
	}
}

// drawLive redraws the one live line: the call in flight, the block being
// written, or the wait for the model.
func (v *View) drawLive() {
	now := v.o.Now()
	sp := styleSpin.Render(spinner[v.spin%len(spinner)])
	var s string
	switch {
	case v.tool != nil:
		s = sp + " " + v.tool.label + "  " + styleFaint.Render(Duration(now.Sub(v.tool.started)))
	case strings.TrimSpace(v.blocks.Pending()) != "":
		p := strings.TrimRight(v.blocks.Pending(), "\n")
		if v.shown > 0 {
			// The growing last line of the rendering: the words after
			// the printed lines.
			lines := strings.Split(v.md.Render(p), "\n")
			p = plainText(lines[len(lines)-1])
		} else if i := strings.LastIndexByte(p, '\n'); i >= 0 {
			p = p[i+1:]
		}
		s = sp + " " + styleFaint.Render(sessions.Clean(strings.TrimSpace(strings.ReplaceAll(p, "\t", " "))))
	case !v.started && now.Sub(v.begun) >= queuedAfter:
		// No user frame yet: the send waits its turn behind the
		// session's active run (interfaces.md), not for a model.
		s = sp + " " + styleFaint.Render("queued: the session's active run goes first  "+Duration(now.Sub(v.begun)))
	case !v.gotToken:
		s = sp + " " + styleFaint.Render("waiting for the model  "+Duration(now.Sub(v.begun)))
	default:
		s = sp + " " + styleFaint.Render("thinking  "+Duration(now.Sub(v.last)))
	}
	s = ansi.Truncate(s, v.o.Width-1, "…")
	v.write("\r\x1b[K" + s)
	v.live = true
}

// Label is a tool call as a person reads it: a model's `tsh call read
// x.go` is `read x.go`; arguments with spaces are quoted, the whole cut
// to 80 runes, control characters shown as U+FFFD.
func Label(name string, args []string) string {
	tool, argv := Unwrap(name, args)
	return sessions.Clean(sessions.Command(tool, argv))
}

// ToolLine is the line a finished tool call leaves (plain text):
//
//	✓ read calc.sh  42 ms
//	✗ bash "sh test.sh"  exit status 1  0.3 s
//	⊘ bash denied by agent-policy
//	⊘ bash cancelled  2.0 s
//
// An error's line has no detail: its result's last lines follow it
// (Tail), where a failure says what failed.
func ToolLine(status, label, layer, content string, d time.Duration) string {
	dur := ""
	if d > 0 {
		dur = "  " + Duration(d)
	}
	switch status {
	case "ok":
		return "✓ " + label + dur
	case "denied":
		by := "denied"
		if layer != "" {
			by += " by " + sessions.Clean(layer)
		}
		return "⊘ " + label + " " + by
	case "cancelled":
		return "⊘ " + label + " cancelled" + dur
	}
	return "✗ " + label + dur
}

// TailLines is how many lines of a failed call's result the chat shows.
const TailLines = 6

// Tail is the last n non-blank lines of a tool's result, control
// characters as U+FFFD: where a failing command says why (its first line
// is often a listing's "total 36").
func Tail(content string, n int) []string {
	var out []string
	lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimRight(lines[i], " \t\r"); strings.TrimSpace(l) != "" {
			out = append(out, sessions.Clean(l))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func colorToolLine(s, status string) string {
	sym, rest, _ := strings.Cut(s, " ")
	switch status {
	case "ok":
		sym = styleOK.Render(sym)
	case "denied", "cancelled":
		sym = styleDenied.Render(sym)
	default:
		sym = styleErr.Render(sym)
	}
	return sym + " " + rest
}

func cutRunes(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}

// Duration is an elapsed time for a person: "42 ms", "1.3 s", "14 s",
// "2m5s".
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return d.Round(time.Second).String()
}

// Colorize colours a diff or patch for a terminal: added lines green,
// removed red, hunk headers cyan, file headers bold.
func Colorize(diff string) string {
	lines := strings.Split(diff, "\n")
	add, del, hunk, head := styleOK, styleErr, styleSpin, styleBold
	for i, l := range lines {
		l = sessions.Clean(l)
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "*** "):
			lines[i] = head.Render(l)
		case strings.HasPrefix(l, "@@"):
			lines[i] = hunk.Render(l)
		case strings.HasPrefix(l, "+"):
			lines[i] = add.Render(l)
		case strings.HasPrefix(l, "-"):
			lines[i] = del.Render(l)
		default:
			lines[i] = l
		}
	}
	return strings.Join(lines, "\n")
}

// sanitize shows control characters (but newline and tab) as U+FFFD.
func sanitize(s string) string { return sessions.Clean(s) }
