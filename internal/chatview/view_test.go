package chatview

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/cortexfs/ctx/ipc"
)

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func plain(s string) string              { return ansi.Strip(s) }

// screen is what a terminal shows of out (colours dropped): "\r" goes
// to the line's start, "\x1b[K" erases to its end, "\n" starts a line.
func screen(out string) string {
	out = regexp.MustCompile(`\x1b\[[0-9;]*m`).ReplaceAllString(out, "")
	var lines []string
	var cur []rune
	col := 0
	for i := 0; i < len(out); {
		switch {
		case strings.HasPrefix(out[i:], "\x1b[K"):
			cur = cur[:col]
			i += 3
		case out[i] == '\r':
			col = 0
			i++
		case out[i] == '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
			i++
		default:
			r := []rune(out[i:])[0]
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
			i += len(string(r))
		}
	}
	return strings.Join(append(lines, string(cur)), "\n")
}

// TestViewRun: a run's frames leave one line per tool call with its status
// and duration, the Markdown rendered block by block, and a status line
// with usage and cost.
func TestViewRun(t *testing.T) {
	var b strings.Builder
	clk := newClock()
	v, err := New(&b, Options{Width: 80, Now: clk.now, Cost: func(f *ipc.Frame) string { return "$0.0045" }})
	if err != nil {
		t.Fatal(err)
	}
	v.Begin()
	v.Frame(&ipc.Frame{Type: ipc.TypeUser, Run: "r", Text: "hi"})
	clk.add(1500 * time.Millisecond)
	v.Tick()
	if !strings.Contains(plain(b.String()), "waiting for the model  1.5 s") {
		t.Errorf("no wait shown: %q", b.String())
	}
	v.Frame(&ipc.Frame{Type: ipc.TypeToolCall, Name: "tsh", Args: []string{"call", "read", "calc.sh"}})
	clk.add(42 * time.Millisecond)
	v.Tick()
	if !strings.Contains(plain(b.String()), " read calc.sh  42 ms") {
		t.Errorf("no running line: %q", b.String())
	}
	v.Frame(&ipc.Frame{Type: ipc.TypeToolResult, Name: "tsh", Status: "ok", Content: "1\tx"})
	v.Frame(&ipc.Frame{Type: ipc.TypeToolCall, Name: "tsh", Args: []string{"call", "bash", "sh test.sh"}})
	clk.add(300 * time.Millisecond)
	v.Frame(&ipc.Frame{Type: ipc.TypeToolResult, Name: "tsh", Status: "error", Content: "FAIL add\nexit status 1\n"})
	v.Frame(&ipc.Frame{Type: ipc.TypeToolCall, Name: "tsh", Args: []string{"call", "bash", "rm -rf /"}})
	v.Frame(&ipc.Frame{Type: ipc.TypeToolResult, Name: "tsh", Status: "denied", Layer: "agent-policy", Content: "denied"})
	for _, d := range []string{"# Fix", "ed\n\nSome *text*", " here.\n\n- one\n- two\n\n```go\nx := 1\n", "```\n\ntail"} {
		v.Frame(&ipc.Frame{Type: ipc.TypeDelta, Text: d})
	}
	v.Frame(&ipc.Frame{Type: ipc.TypeAssistant, Text: "ignored: the deltas were shown"})
	clk.add(time.Second)
	v.Frame(&ipc.Frame{Type: ipc.TypeDone, Status: "ok", Usage: &ipc.Usage{Input: 1000, Output: 100}})
	got := screen(b.String())
	want := []string{
		"✓ read calc.sh  42 ms\n",
		"✗ bash \"sh test.sh\"  300 ms\n  │ FAIL add\n  │ exit status 1\n",
		"⊘ bash \"rm -rf /\" denied by agent-policy\n",
		"Fixed",
		"Some text here.",
		"• one\n",
		"x := 1",
		"tail",
		"── ok · 2.8 s · 1000 in · 100 out · $0.0045\n",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("screen lacks %q after %d:\n%s", w, at, got)
		}
		at += i + len(w)
	}
	for _, markup := range []string{"# Fixed", "*text*", "```", "ignored"} {
		if strings.Contains(got, markup) {
			t.Errorf("screen has %q:\n%s", markup, got)
		}
	}
	if !strings.Contains(got, "Fixed\n\n") {
		t.Errorf("blocks not separated by a blank line:\n%q", got)
	}
}

// TestViewStreamsALongParagraph: a paragraph streamed a word at a time is
// printed line by line, wrapped, while it streams (not held on one cut
// live line until it ends), and the screen at the end holds exactly the
// whole rendering once: no line lost or repeated. One with an open ** is
// held until it closes.
func TestViewStreamsALongParagraph(t *testing.T) {
	words := strings.Fields(strings.Repeat("the quick brown fox jumps over the lazy dog and keeps running ", 12))
	for _, tc := range []struct {
		name  string
		text  []string
		early bool // lines printed before the end
	}{
		{"plain", words, true},
		{"open bold", append([]string{"**"}, words...), false},
		{"second paragraph", append(append(append([]string{}, words[:10]...), "\n\n"), words...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			v, err := New(&b, Options{Width: 50, Now: newClock().now})
			if err != nil {
				t.Fatal(err)
			}
			v.Begin()
			var all strings.Builder
			for i, w := range tc.text {
				if i > 0 && w != "\n\n" && !strings.HasSuffix(all.String(), "\n") && !strings.HasSuffix(all.String(), "**") {
					w = " " + w
				}
				all.WriteString(w)
				v.Frame(&ipc.Frame{Type: ipc.TypeDelta, Text: w})
				if i == len(tc.text)*3/4 {
					lines := strings.Count(screen(b.String()), "\n")
					if tc.early && lines < 5 {
						t.Fatalf("%d lines on the screen three quarters through:\n%s", lines, screen(b.String()))
					}
					if !tc.early && lines > 1 {
						t.Fatalf("an open ** printed lines early:\n%s", screen(b.String()))
					}
				}
			}
			v.Frame(&ipc.Frame{Type: ipc.TypeAssistant, Text: all.String()})
			v.Frame(&ipc.Frame{Type: ipc.TypeDone, Status: "ok"})
			got := screen(b.String())
			want := plain(v.md.Render(all.String()))
			if tc.name == "second paragraph" {
				want = plain(v.md.Render(strings.Join(words[:10], " ")) + "\n\n" + v.md.Render(strings.Join(words, " ")))
			}
			if !strings.Contains(got, want+"\n") {
				t.Fatalf("the screen:\n%s\nwant the rendering:\n%s", got, want)
			}
		})
	}
}

// TestViewNotesWrapAndDoNotRepeat: a failed candidate's long reason wraps
// at words within the width; the run's model_unavailable error, whose
// message joins the reasons already shown, says so once instead.
func TestViewNotesWrapAndDoNotRepeat(t *testing.T) {
	var b strings.Builder
	v, err := New(&b, Options{Width: 40, Now: newClock().now})
	if err != nil {
		t.Fatal(err)
	}
	v.Begin()
	reason := "anthropic: 429 Too Many Requests: Number of requests has exceeded your per-minute rate limit (after 3 attempts)"
	v.Frame(&ipc.Frame{Type: ipc.TypeCandidate, Model: "anthropic/claude-x", Status: "failed", Reason: reason})
	v.Frame(&ipc.Frame{Type: ipc.TypeError, Run: "r", Code: ipc.CodeModelUnavailable, Message: "dispatch: model unavailable: anthropic/claude-x: " + reason})
	v.Frame(&ipc.Frame{Type: ipc.TypeDone, Status: "error"})
	sc := screen(b.String())
	if strings.Count(sc, "per-minute") != 1 {
		t.Fatalf("the reason is shown %d times:\n%s", strings.Count(sc, "per-minute"), sc)
	}
	for _, l := range strings.Split(sc, "\n") {
		if len([]rune(l)) > 40 {
			t.Fatalf("a line wider than the terminal: %q", l)
		}
	}
	if !strings.Contains(sc, "Number of requests has") || strings.Contains(sc, "Numb\n") {
		t.Fatalf("not wrapped at words:\n%s", sc)
	}
	if !strings.Contains(sc, "error model_unavailable: no model") || !strings.Contains(sc, "candidate answered") {
		t.Fatalf("the error:\n%s", sc)
	}
}

// TestViewQueued: a send whose user frame has not come (it waits behind
// the session's active run) says it is queued, not waiting for a model;
// once its run begins, the wait is the model's.
func TestViewQueued(t *testing.T) {
	var b strings.Builder
	clk := newClock()
	v, err := New(&b, Options{Width: 80, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	v.Begin()
	clk.add(100 * time.Millisecond)
	v.Tick()
	if strings.Contains(plain(b.String()), "queued") {
		t.Fatal("queued said at once")
	}
	clk.add(2 * time.Second)
	v.Tick()
	if !strings.Contains(plain(b.String()), "queued: the session's active run goes first  2.1 s") {
		t.Fatalf("not queued: %q", screen(b.String()))
	}
	v.Frame(&ipc.Frame{Type: ipc.TypeUser, Run: "r", Text: "hi"})
	b.Reset()
	v.Tick()
	if !strings.Contains(plain(b.String()), "waiting for the model") {
		t.Fatalf("after the user frame: %q", screen(b.String()))
	}
}

// TestViewUserImages: a user message's images show as their reference
// lines, never as their bytes.
func TestViewUserImages(t *testing.T) {
	var b strings.Builder
	v, err := New(&b, Options{Width: 80, Now: newClock().now})
	if err != nil {
		t.Fatal(err)
	}
	v.Begin()
	sum := strings.Repeat("ab", 32)
	v.Frame(&ipc.Frame{Type: ipc.TypeUser, Run: "r", Text: "look", Images: []ipc.Image{{SHA256: sum, MediaType: ipc.MediaPNG, Name: "shot.png", Size: 123456}}})
	v.Frame(&ipc.Frame{Type: ipc.TypeDone, Status: "ok"})
	if got := screen(b.String()); !strings.Contains(got, "[image shot.png, image/png, 123456 bytes, sha256:abababababab…]") {
		t.Fatalf("screen lacks the image line:\n%s", got)
	}
}
